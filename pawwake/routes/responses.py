"""``POST /v1/responses``: OpenAI's Responses API relayed byte for byte, with memory (its
turn: ``protocols/responses/turn.py``)."""

from __future__ import annotations

import logging

from aiohttp import web

from pawwake.protocols.responses.turn import ResponsesTurn
from pawwake.relay.serve import turn_handler

log = logging.getLogger(__name__)  # the one line per request

create_response = turn_handler(ResponsesTurn, log)


def setup(app: web.Application) -> None:
    app.router.add_post("/responses", create_response, name="responses")
