"""API authentication: the gateway secret in a header, compared in constant time."""

from __future__ import annotations

import hmac
import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

from pawwake.api_error import ApiError
from pawwake.app_faces import STARTUP_SETTINGS, face_of

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

def presented_key(request: web.Request) -> str | None:
    """The key a program sent: ``X-Gateway-Key``, ``Authorization: Bearer`` or (as Anthropic
    clients send it) ``x-api-key``. Never a URL."""
    key = request.headers.get("X-Gateway-Key")
    if key:
        return key.strip()
    key = request.headers.get("x-api-key")
    if key and key.strip():
        return key.strip()
    auth = request.headers.get("Authorization", "")
    scheme, _, token = auth.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return None


def key_matches(presented: str | None, secret: str) -> bool:
    if presented is None:
        return False
    return hmac.compare_digest(presented.encode("utf-8"), secret.encode("utf-8"))


@web.middleware
async def api_auth_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Guards every program sub-app (/v1, /api, /import, /mcp) it is installed on. Cookies never
    count here: only the header key does. A refusal is rendered by the sub-app's error
    middleware, in its envelope."""
    secret = face_of(request, STARTUP_SETTINGS).GATEWAY_SECRET
    if secret and not key_matches(presented_key(request), secret):
        raise ApiError("invalid_api_key", "Missing or wrong gateway key: send X-Gateway-Key or "
                       "Authorization: Bearer with GATEWAY_SECRET.", status=401)
    return await handler(request)


def warn_if_open(secret: str) -> None:
    if not secret:
        log.warning("GATEWAY_SECRET is not set: /v1, /api and /mcp accept requests without a key")
