"""Parsing a ``POST /v1/responses`` body and naming its session."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pawwake.chat.prepared import ChatRejected
from pawwake.chat.request_body import json_object_body
from pawwake.chat.sessions import SESSION_HEADER, clean_session_id, resolve_session_id
from pawwake.text.messages import ChatMessage

CODEX_SESSION_HEADER = "session-id"


def parse_responses_body(raw: bytes) -> dict[str, Any]:
    """The request body as a dict, or ChatRejected(400) saying what is wrong with it. Fields
    the gateway does not read (``previous_response_id``, ``store``, tools...) are the
    provider's to judge and pass through untouched."""
    body = json_object_body(raw)
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


def responses_session_id(headers: Mapping[str, str], body: Mapping[str, Any],
                         messages: Sequence[ChatMessage]) -> str:
    """``X-Session-Id``, else Codex's ``session-id`` header, else ``prompt_cache_key`` (one
    per conversation), else chat's rules (``user``, ``metadata.session_id``, the opening
    message)."""
    found = (clean_session_id(headers.get(SESSION_HEADER))
             or clean_session_id(headers.get(CODEX_SESSION_HEADER))
             or clean_session_id(body.get("prompt_cache_key")))
    if found:
        return found
    return resolve_session_id(headers, {**body, "messages": messages})
