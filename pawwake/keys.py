"""Typed application keys of the program sub-apps (the faces' keys are in ``app_faces.py``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from aiohttp import web

if TYPE_CHECKING:
    from pawwake.api_error import ApiError

# Per program sub-app (/api, /v1, /v1/messages, /mcp): how its error middleware renders a
# refusal, and whether CORS admits only origins listed by name (MCP's rule).
ERROR_ENVELOPE: web.AppKey[Callable[[ApiError], web.Response]] = web.AppKey("error_envelope")
CORS_NAMED_ORIGINS_ONLY: web.AppKey[bool] = web.AppKey("cors_named_origins_only")
