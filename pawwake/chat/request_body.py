"""The first checks every protocol makes on a request body, with the same errors."""

from __future__ import annotations

from typing import Any

from pawwake.chat.prepared import ChatRejected
from pawwake.text.json_input import JsonTooDeep, parse_chat_json


def json_object_body(raw: bytes) -> dict[str, Any]:
    """The body as a JSON object, or ChatRejected(400) saying why it is not one; what the
    object must hold is the protocol's to check."""
    try:
        body = parse_chat_json(raw)
    except JsonTooDeep as exc:
        raise ChatRejected(400, "json_too_deep", str(exc)) from None
    except (ValueError, UnicodeDecodeError):
        raise ChatRejected(400, "invalid_json", "Request body is not valid JSON.") from None
    if not isinstance(body, dict):
        raise ChatRejected(400, "invalid_body", "Request body must be a JSON object.")
    return body
