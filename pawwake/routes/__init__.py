"""HTTP routes for programs: parse and validate input, call a service, shape the response."""

from __future__ import annotations

from aiohttp import web

from pawwake.routes import (
    chat,
    consolidation,
    conversations,
    health,
    jobs,
    mcp,
    memories,
    memory_search,
    messages,
    recall,
    settings,
    threads,
)


def setup_routes(app: web.Application) -> None:
    health.setup(app)
    settings.setup(app)
    chat.setup(app)
    messages.setup(app)
    memory_search.setup(app)
    memories.setup(app)
    consolidation.setup(app)
    recall.setup(app)
    conversations.setup(app)
    threads.setup(app)
    jobs.setup(app)
    mcp.setup(app)
