"""The error middleware of every program sub-app (/api, /v1, /v1/messages, /mcp): whatever a
handler raises leaves as JSON with a real status, in the sub-app's envelope."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aiohttp import web

from pawwake import keys
from pawwake.api_error import ApiError
from pawwake.app_faces import DATABASE, STARTUP_SETTINGS, face_of
from pawwake.db.errors import Conflict, DatabaseUnavailable, NotFound
from pawwake.db.pool import UNAVAILABLE_ERRORS
from pawwake.db.statement_bounds import StatementTimeout

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Refusals, HTTP errors (404/405/413 included), a database away and bugs, rendered by
    ``keys.ERROR_ENVELOPE`` of the serving sub-app."""
    try:
        return await handler(request)
    except ApiError as exc:
        refusal = exc
    except web.HTTPRequestEntityTooLarge:
        limit = face_of(request, STARTUP_SETTINGS).MAX_REQUEST_MB
        refusal = ApiError("request_too_large",
                           f"Request body is larger than {limit} MB (MAX_REQUEST_MB).", status=413)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        refusal = ApiError(_code_for(exc.status), exc.text or exc.reason, status=exc.status)
    except NotFound as exc:
        refusal = ApiError("not_found", str(exc), status=404)
    except Conflict as exc:
        refusal = ApiError("conflict", _sentence(str(exc)), status=409)
    except StatementTimeout as exc:
        log.warning("a statement of %s %s ran into its time bound", request.method,
                    request.path)
        refusal = ApiError(exc.code, str(exc), status=503)
    except UNAVAILABLE_ERRORS as exc:
        refusal = database_unavailable(request, exc)
    except Exception:
        log.exception("unhandled error on %s %s", request.method, request.path)
        refusal = ApiError("internal_error", "Internal error in the gateway; see its log.",
                           status=500)
    return request.config_dict[keys.ERROR_ENVELOPE](refusal)


def database_unavailable(request: web.Request, exc: BaseException) -> ApiError:
    """503: the server is down, restarting, not connected yet or turned off. The code is
    ``database_unavailable`` unless the raiser chose another (``DatabaseUnavailable.code``)."""
    log.warning("database unavailable on %s %s (%s)", request.method, request.path,
                type(exc).__name__)
    note_unreachable(request.config_dict, exc)
    if isinstance(exc, DatabaseUnavailable):
        return ApiError(exc.code, str(exc), status=503)
    return ApiError("database_unavailable",
                    "The database is unavailable right now; try again shortly.", status=503)


def note_unreachable(app: Mapping[Any, Any], exc: BaseException) -> None:
    """A lost connection shows at once on GET / and the status page."""
    database = app.get(DATABASE)
    if database is not None and not isinstance(exc, DatabaseUnavailable):
        database.mark_unreachable()


def _sentence(clause: str) -> str:
    """A database conflict's clause ("thread x already exists") as an API sentence."""
    text = clause[:1].upper() + clause[1:]
    return text if text.endswith(".") else text + "."


def _code_for(status: int) -> str:
    return {400: "bad_request", 404: "not_found", 405: "method_not_allowed",
            408: "request_timeout", 409: "conflict", 413: "request_too_large"}.get(status, f"http_{status}")
