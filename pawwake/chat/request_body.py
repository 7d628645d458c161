"""The first checks every protocol makes on a request body, with the same errors, and chat
completions' own (``parse_chat_body``)."""

from __future__ import annotations

from typing import Any

from pawwake.chat.prepared import ChatRejected
from pawwake.text.json_input import JsonTooDeep, parse_chat_json

MESSAGE_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})


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


def parse_chat_body(raw: bytes) -> dict[str, Any]:
    """The request body as a dict, or ChatRejected(400) saying what is wrong with it."""
    body = json_object_body(raw)
    messages = body.get("messages")
    if messages is None:
        raise ChatRejected(400, "missing_messages", "'messages' is required.", param="messages")
    if not isinstance(messages, list) or not messages:
        raise ChatRejected(400, "invalid_messages", "'messages' must be a non-empty array.",
                           param="messages")
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in MESSAGE_ROLES:
            raise ChatRejected(
                400, "invalid_messages",
                f"messages[{index}] must be an object with a role of "
                + ", ".join(sorted(MESSAGE_ROLES)) + ".", param=f"messages[{index}]")
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise ChatRejected(400, "invalid_model", "'model' must be a string.", param="model")
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise ChatRejected(400, "invalid_stream", "'stream' must be true or false.",
                           param="stream")
    return body
