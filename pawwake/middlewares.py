"""Turns failures on /v1 and /api into the error body each caller expects."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

from pawwake.auth import is_protected
from pawwake.errors import error_for_path

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Our own errors on program endpoints always carry JSON and a real status."""
    try:
        return await handler(request)
    except web.HTTPRequestEntityTooLarge:
        if not is_protected(request.path):
            raise
        limit = request.app._client_max_size // (1024 * 1024)
        return error_for_path(request.path, 413, "request_too_large",
                              f"Request body is larger than {limit} MB (MAX_REQUEST_MB).")
    except web.HTTPException as exc:
        if not is_protected(request.path) or exc.status < 400:
            raise
        return error_for_path(request.path, exc.status, _code_for(exc.status),
                              exc.text or exc.reason)
    except Exception:
        if not is_protected(request.path):
            raise
        log.exception("unhandled error on %s %s", request.method, request.path)
        return error_for_path(request.path, 500, "internal_error",
                              "Internal error in the gateway; see its log.")


def _code_for(status: int) -> str:
    return {400: "bad_request", 404: "not_found", 405: "method_not_allowed",
            409: "conflict", 413: "request_too_large"}.get(status, f"http_{status}")
