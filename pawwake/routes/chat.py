"""/v1/chat/completions and /v1/models: OpenAI-compatible chat through the gateway.

A chat request is a turn of the relay (``relay/``): served in a task of its own, relayed
byte for byte as it arrives, ended in one place. The provider's own error status and body
reach the client unchanged.
"""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import web

from pawwake.app_faces import HTTP, MODELS, face_of, settings_of
from pawwake.relay.serve import turn_handler
from pawwake.relay.turn import ChatTurn

log = logging.getLogger(__name__)  # the one line per request

chat_completions = turn_handler(ChatTurn, log)


async def list_models(request: web.Request) -> web.Response:
    """DEFAULT_MODEL first, then the provider's models: fresh when it answers in time, else
    the last list it gave (a failing provider is not waited on again for a while)."""
    settings = await settings_of(request)
    default = settings.DEFAULT_MODEL
    data: list[dict[str, Any]] = []
    if default:
        data.append({"id": default, "object": "model", "created": 0, "owned_by": "pawwake"})
    listed = await face_of(request, MODELS).quick_for(face_of(request, HTTP).session, settings)
    if listed is not None:
        for model in listed.models:
            if model["id"] != default:
                data.append({"id": model["id"], "object": "model", "created": 0,
                             "owned_by": listed.source})
    return web.json_response({"object": "list", "data": data})


def setup(app: web.Application) -> None:
    """Routes of the /v1 sub-app (a turn works with its ``RelayParts``, built by the
    assembly)."""
    app.router.add_post("/chat/completions", chat_completions, name="chat_completions")
    app.router.add_get("/models", list_models, name="models")
