"""Parsing a ``POST /v1/responses`` body and naming its session."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pawwake.chat.pipeline import ChatRejected
from pawwake.chat.sessions import SESSION_HEADER, resolve_session_id
from pawwake.text.json_input import JsonTooDeep, parse_chat_json

CODEX_SESSION_HEADER = "session-id"
MAX_SESSION_ID = 200


def parse_responses_body(raw: bytes) -> dict[str, Any]:
    """The request body as a dict, or ChatRejected(400) saying what is wrong with it. Fields
    the gateway does not read (``previous_response_id``, ``store``, tools...) are the
    provider's to judge and pass through untouched."""
    try:
        body = parse_chat_json(raw)
    except JsonTooDeep as exc:
        raise ChatRejected(400, "json_too_deep", str(exc)) from None
    except (ValueError, UnicodeDecodeError):
        raise ChatRejected(400, "invalid_json", "Request body is not valid JSON.") from None
    if not isinstance(body, dict):
        raise ChatRejected(400, "invalid_body", "Request body must be a JSON object.")
    value = body.get("input")
    if value is not None and not isinstance(value, (str, list)):
        raise ChatRejected(400, "invalid_input", "'input' must be a string or an array.",
                           param="input")
    for index, item in enumerate(value if isinstance(value, list) else ()):
        if not isinstance(item, dict):
            raise ChatRejected(400, "invalid_input", f"input[{index}] must be an object.",
                               param=f"input[{index}]")
    for name, kind, label in (("model", str, "a string"), ("instructions", str, "a string"),
                              ("stream", bool, "true or false")):
        if body.get(name) is not None and not isinstance(body[name], kind):
            raise ChatRejected(400, f"invalid_{name}", f"'{name}' must be {label}.",
                               param=name)
    return body


def _clean(value: Any) -> str | None:
    if isinstance(value, str) and value.strip():
        return value.strip()[:MAX_SESSION_ID]
    return None


def responses_session_id(headers: Mapping[str, str], body: Mapping[str, Any],
                         messages: list[dict[str, Any]]) -> str:
    """``X-Session-Id``, else Codex's ``session-id`` header, else ``prompt_cache_key`` (one
    per conversation), else chat's rules (``user``, ``metadata.session_id``, the opening
    message)."""
    found = (_clean(headers.get(SESSION_HEADER)) or _clean(headers.get(CODEX_SESSION_HEADER))
             or _clean(body.get("prompt_cache_key")))
    if found:
        return found
    return resolve_session_id(headers, {**body, "messages": messages})
