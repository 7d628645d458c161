"""Turns failures on /v1 and /api into the error body each caller expects."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aiohttp import web

from pawwake import keys
from pawwake.auth import is_protected
from pawwake.db.errors import DatabaseUnavailable
from pawwake.db.pool import UNAVAILABLE_ERRORS
from pawwake.errors import error_for_path
from pawwake.services import services_of

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
        limit = services_of(request).settings.MAX_REQUEST_MB
        return error_for_path(request.path, 413, "request_too_large",
                              f"Request body is larger than {limit} MB (MAX_REQUEST_MB).")
    except web.HTTPException as exc:
        if not is_protected(request.path) or exc.status < 400:
            raise
        return error_for_path(request.path, exc.status, _code_for(exc.status),
                              exc.text or exc.reason)
    except UNAVAILABLE_ERRORS as exc:
        if not is_protected(request.path):
            raise
        return database_unavailable(request, exc)
    except Exception:
        if not is_protected(request.path):
            raise
        log.exception("unhandled error on %s %s", request.method, request.path)
        return error_for_path(request.path, 500, "internal_error",
                              "Internal error in the gateway; see its log.")


def database_unavailable(request: web.Request, exc: BaseException) -> web.Response:
    """503 ``database_unavailable``: the server is down, restarting or not connected yet."""
    log.warning("database unavailable on %s %s (%s)", request.method, request.path,
                type(exc).__name__)
    note_unreachable(request.config_dict, exc)
    message = (str(exc) if isinstance(exc, DatabaseUnavailable)
               else "The database is unavailable right now; try again shortly.")
    return error_for_path(request.path, 503, "database_unavailable", message)


def note_unreachable(app: Mapping[Any, Any], exc: BaseException) -> None:
    """A lost connection shows at once on GET / and the status page."""
    services = app.get(keys.SERVICES)
    database = services.database if services is not None else None
    if database is not None and not isinstance(exc, DatabaseUnavailable):
        database.mark_unreachable()


def _code_for(status: int) -> str:
    return {400: "bad_request", 404: "not_found", 405: "method_not_allowed",
            409: "conflict", 413: "request_too_large"}.get(status, f"http_{status}")
