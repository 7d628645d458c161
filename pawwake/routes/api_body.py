"""How an /api route reads its request body: bounded, JSON, an object with known fields.

The schema layer of the API is ``read_fields``: a mapping of field name to parser (the
validators in ``memory/fields.py``, ``conversations/manage.py``...), each returning a clean value
or raising ``ApiError`` naming its field. A refusal is rendered by the /api sub-app's error
middleware. See docs/ARCHITECTURE.md, "Errors and validation", for why this is hand-written
rather than msgspec.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from aiohttp import web

from pawwake.api_error import ApiError
from pawwake.memory.fields import reject_unknown, require_object
from pawwake.request_body import BodyTooLarge, read_bounded
from pawwake.text.json_input import JsonTooDeep, parse_json

# Most /api bodies are a memory or a handful of ids: anything much bigger is refused from its
# Content-Length before it is read (parsing JSON holds the event loop). Routes with a real need
# pass their own limit (sidecar turns), or None for the app's MAX_REQUEST_MB (imports).
MAX_BODY_BYTES = 1024 * 1024

Parser = Callable[[Any], Any]
_ABSENT = object()


async def read_json(request: web.Request, *, max_bytes: int | None = MAX_BODY_BYTES,
                    too_large: str | None = None, too_large_code: str = "request_too_large",
                    empty: Any = _ABSENT) -> Any:
    """The JSON body. ``empty`` stands in for a missing body when given, else 400. A body over
    ``max_bytes`` is refused (413, ``too_large`` saying why) before it is read or parsed."""
    if max_bytes is None:
        data = await request.read()
    else:
        try:
            data = await read_bounded(request, max_bytes)
        except BodyTooLarge:
            raise ApiError(too_large_code, too_large or "The request body is larger than "
                           f"{max_bytes // 1024} KB.", status=413) from None
    try:
        raw = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ApiError("invalid_json", "The body is not UTF-8 encoded JSON.") from None
    if not raw.strip():
        if empty is not _ABSENT:
            return empty
        raise ApiError("invalid_json", "The body is empty; send JSON.")
    try:
        return parse_json(raw)
    except JsonTooDeep as exc:
        raise ApiError("json_too_deep", str(exc)) from None
    except ValueError:
        raise ApiError("invalid_json", "The body is not valid JSON.") from None


async def read_object(request: web.Request, allowed: tuple[str, ...] | None = None,
                      **options: Any) -> dict[str, Any]:
    """The body as a JSON object; with ``allowed``, any other field is refused (400)."""
    body = require_object(await read_json(request, **options))
    if allowed is not None:
        reject_unknown(body, allowed)
    return body


def optional(parse: Parser) -> Parser:
    """A parser that lets JSON null through as None."""
    return lambda value: None if value is None else parse(value)


def fields_of(body: Any, schema: Mapping[str, Parser],
              defaults: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The clean fields of a JSON object: every field of ``schema`` parsed (a field that is
    absent gets its default when it has one, else its parser sees None and says it is
    missing); any field not in ``schema`` is refused."""
    body = require_object(body)
    reject_unknown(body, tuple(schema))
    defaults = defaults or {}
    return {name: defaults[name] if name not in body and name in defaults
            else parse(body.get(name)) for name, parse in schema.items()}


async def read_fields(request: web.Request, schema: Mapping[str, Parser],
                      defaults: Mapping[str, Any] | None = None, **options: Any
                      ) -> dict[str, Any]:
    """``fields_of`` the request's JSON body (``options`` as for ``read_json``)."""
    return fields_of(await read_json(request, **options), schema, defaults)
