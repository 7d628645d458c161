"""Shared plumbing for the database-backed /api routes: error mapping and JSON bodies."""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable, Collection
from datetime import datetime
from typing import Any

from aiohttp import web

from pawwake.chat.conversations import Invalid
from pawwake.db.errors import Conflict, NotFound
from pawwake.errors import api_error
from pawwake.services import services_of
from pawwake.settings import SettingError
from pawwake.text.json_input import JsonTooDeep, parse_json

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def guarded(feature: str, *, setting_error_code: str = "invalid_setting"
            ) -> Callable[[Handler], Handler]:
    """Map a service's typed errors to real statuses (400/404/409), and answer 503 when the
    database is turned off. ``feature`` names what needs the database, for the message."""

    def decorate(handler: Handler) -> Handler:
        @functools.wraps(handler)
        async def wrapper(request: web.Request) -> web.StreamResponse:
            if services_of(request).database is None:
                return api_error(503, "database_unavailable",
                                 f"{feature} need the database (DATABASE_ENABLED=false).")
            try:
                return await handler(request)
            except Invalid as exc:
                return api_error(400, exc.code, str(exc))
            except SettingError as exc:
                return api_error(400, setting_error_code, str(exc))
            except NotFound as exc:
                return api_error(404, "not_found", f"No such {exc}.")
            except Conflict as exc:
                return api_error(409, "conflict", str(exc).capitalize() + ".")

        return wrapper

    return decorate


def _encode(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"cannot encode {type(value).__name__}")


def json_body(body: Any, status: int = 200) -> web.Response:
    """A JSON response that writes datetimes as ISO 8601 and keeps non-ASCII text readable."""
    return web.json_response(body, status=status,
                             dumps=lambda v: json.dumps(v, default=_encode, ensure_ascii=False))


async def read_json(request: web.Request) -> Any:
    try:
        return parse_json(await request.read())
    except JsonTooDeep as exc:
        raise Invalid("json_too_deep", str(exc)) from None
    except (ValueError, UnicodeDecodeError):
        raise Invalid("invalid_json", "The body is not valid JSON.") from None


async def read_object(request: web.Request, allowed: Collection[str] | None = None
                      ) -> dict[str, Any]:
    """The body as a JSON object; with ``allowed``, any other field is refused (400)."""
    body = await read_json(request)
    if not isinstance(body, dict):
        raise Invalid("invalid_body", "Send a JSON object.")
    unknown = sorted(set(body) - set(allowed)) if allowed is not None else []
    if unknown:
        raise Invalid("unknown_field", f"Unknown field: {unknown[0]}.")
    return body
