"""JSON answers of the /api routes that carry stored rows."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from aiohttp import web


def _encode(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"cannot encode {type(value).__name__}")


def json_body(body: Any, status: int = 200) -> web.Response:
    """A JSON response that writes datetimes as ISO 8601 and keeps non-ASCII text readable."""
    return web.json_response(body, status=status,
                             dumps=lambda v: json.dumps(v, default=_encode, ensure_ascii=False))
