"""HTTP routes for programs: parse and validate input, call a service, shape the response.

Each surface is a sub-app (``sub_apps``) mounted here; its routes are registered before it is
mounted (mounting prefixes them), fixed paths before ``{id}`` ones.
"""

from __future__ import annotations

from aiohttp import web

from pawwake.routes import (
    chat,
    consolidation,
    conversations,
    health,
    imports,
    jobs,
    mcp,
    memories,
    memory_search,
    messages,
    recall,
    responses,
    settings,
    threads,
)
from pawwake.sub_apps import api_app, mcp_app, messages_app, v1_app


def setup_routes(app: web.Application) -> None:
    health.setup(app)
    v1 = v1_app()
    chat.setup(v1)
    responses.setup(v1)
    anthropic = messages_app()
    messages.setup(anthropic)
    api = api_app()
    settings.setup(api)
    memory_search.setup(api)  # before /memories/{id}: "search" is not an id
    memories.setup(api)
    imports.setup(api)
    consolidation.setup(api)
    recall.setup(api)
    conversations.setup(api)
    threads.setup(api)
    jobs.setup(api)
    seed = api_app()
    imports.setup_seed(seed)
    rpc = mcp_app()
    mcp.setup(rpc)
    app.add_subapp("/v1/messages", anthropic)
    app.add_subapp("/v1", v1)
    app.add_subapp("/api", api)
    app.add_subapp("/import", seed)
    app.add_subapp("/mcp", rpc)
