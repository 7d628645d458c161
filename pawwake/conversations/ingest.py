"""Sidecar ingest: validate one turn from Claude Code, Codex or another adapter and store it.

A turn is written in one transaction under the session's write lock. Its first message carries
``turn_id`` (unique within ``source + session_id``), so a retry - even several at once - finds
the stored turn and writes, embeds and extracts nothing again. The recall index and the
extraction job are the turn store's (``turn_store.index_and_schedule``, as for proxied turns),
in the same transaction, so they exist exactly when the turn does.

``replace_reply``: a turn that went on after its first Stop (another hook asked the model to
continue) is sent again under the same ``turn_id`` with the final reply; the stored turn keeps
its rows and only its last assistant message takes the new text (see ingest_replace).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from pawwake.api_error import ApiError
from pawwake.conversations.ingest_replace import replace_final_reply
from pawwake.conversations.turn_store import TurnStore, index_and_schedule
from pawwake.database import require_database
from pawwake.db import conversation_turns as turns_db
from pawwake.db.conversations import NewMessage, insert_messages
from pawwake.db.pool import transaction
from pawwake.local_time import MAX_YEAR, MIN_YEAR, moment_in_range
from pawwake.recall import index as conversation_index

if TYPE_CHECKING:
    from pawwake.settings import Settings

log = logging.getLogger(__name__)

MAX_ID_CHARS = 200
MAX_MODEL_CHARS = 200
MAX_MESSAGES = 200
MAX_CONTENT_CHARS = 200_000
MAX_METADATA_BYTES = 16_384
ROLES = ("user", "assistant", "tool")
TURN_FIELDS = frozenset({"turn_id", "session_id", "source", "model", "messages", "occurred_at",
                         "extract_memories", "metadata", "replace_reply"})
MESSAGE_FIELDS = frozenset({"role", "content", "tool_calls", "tool_call_id", "name"})
TEXT_PART_TYPES = ("text", "input_text", "output_text")


@dataclass(frozen=True)
class TurnMessage:
    role: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Turn:
    turn_id: str
    session_id: str
    source: str
    messages: list[TurnMessage]
    model: str | None = None
    occurred_at: datetime | None = None
    extract_memories: bool = True
    metadata: dict[str, Any] = field(default_factory=dict)
    replace_reply: bool = False


@dataclass(frozen=True)
class IngestResult:
    status: str  # "stored" | "duplicate" | "replaced"
    message_ids: list[int] = field(default_factory=list)
    extraction_job: int | None = None


def _identifier(body: dict[str, Any], name: str) -> str:
    value = body.get(name)
    if not isinstance(value, str) or not value.strip():
        raise ApiError(f"invalid_{name}", f"{name} must be a non-empty string.")
    if len(value) > MAX_ID_CHARS:
        raise ApiError(f"invalid_{name}", f"{name} is limited to {MAX_ID_CHARS} characters.")
    if any(ord(ch) < 32 for ch in value):
        raise ApiError(f"invalid_{name}", f"{name} must not contain control characters.")
    return value


def _content_text(content: Any, where: str) -> str:
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        parts = []
        for part in content:
            if (not isinstance(part, dict) or part.get("type") not in TEXT_PART_TYPES
                    or not isinstance(part.get("text"), str) or set(part) - {"type", "text"}):
                raise ApiError("invalid_content", f"{where}.content parts must be"
                                  ' {"type": "text", "text": "..."} objects.')
            parts.append(part["text"])
        text = "\n".join(parts)
    elif content is None:
        text = ""
    else:
        raise ApiError("invalid_content",
                          f"{where}.content must be a string or a list of text parts.")
    if len(text) > MAX_CONTENT_CHARS:
        raise ApiError("content_too_long",
                          f"{where}.content is limited to {MAX_CONTENT_CHARS} characters.")
    return text


def _message(raw: Any, index: int) -> TurnMessage:
    where = f"messages[{index}]"
    if not isinstance(raw, dict):
        raise ApiError("invalid_message", f"{where} must be an object.")
    unknown = sorted(set(raw) - MESSAGE_FIELDS)
    if unknown:
        raise ApiError("unknown_field", f"Unknown field: {where}.{unknown[0]}.")
    role = raw.get("role")
    if role not in ROLES:
        raise ApiError("invalid_role", f"{where}.role must be one of: {', '.join(ROLES)}.")
    text = _content_text(raw.get("content"), where)
    metadata: dict[str, Any] = {}
    calls = raw.get("tool_calls")
    if calls is not None:
        if role != "assistant" or not isinstance(calls, list) or not all(
                isinstance(c, dict) and isinstance(c.get("id"), str) and c["id"]
                for c in calls):
            raise ApiError("invalid_tool_calls", f"{where}.tool_calls must be a list of"
                              " objects with an id, on an assistant message.")
        if calls:
            metadata["tool_calls"] = calls
    call_id = raw.get("tool_call_id")
    if role == "tool":
        if not isinstance(call_id, str) or not call_id:
            raise ApiError("invalid_tool_call_id",
                              f"{where}.tool_call_id must be a non-empty string on a tool"
                              " message.")
        metadata["tool_call_id"] = call_id
    elif call_id is not None:
        raise ApiError("invalid_tool_call_id", f"{where}.tool_call_id is only for tool"
                          " messages.")
    name = raw.get("name")
    if name is not None:
        if not isinstance(name, str) or len(name) > MAX_ID_CHARS:
            raise ApiError("invalid_name", f"{where}.name must be a short string.")
        metadata["name"] = name
    if not text.strip() and not metadata.get("tool_calls") and role != "tool":
        raise ApiError("empty_content", f"{where}.content must not be empty.")
    return TurnMessage(role=role, text=text, metadata=metadata)


def parse_occurred_at(value: Any) -> datetime | None:
    """RFC 3339 with an explicit offset (``Z`` or ``+08:00``); naive times are refused."""
    if value is None:
        return None
    if not isinstance(value, str) or "T" not in value.upper():
        raise ApiError("invalid_occurred_at",
                          "occurred_at must be an RFC 3339 time such as 2026-01-02T10:00:00Z.")
    try:
        moment = datetime.fromisoformat(value.strip().replace("z", "Z"))
    except ValueError:
        raise ApiError("invalid_occurred_at",
                          "occurred_at must be an RFC 3339 time such as"
                          " 2026-01-02T10:00:00Z.") from None
    if moment.tzinfo is None:
        raise ApiError("invalid_occurred_at", "occurred_at needs a UTC offset (Z or +hh:mm).")
    if not moment_in_range(moment):
        raise ApiError("invalid_occurred_at", f"occurred_at must lie between the years"
                          f" {MIN_YEAR} and {MAX_YEAR} (UTC).")
    return moment


def parse_turn(body: Any) -> Turn:
    """Validate a request body strictly; unknown fields are refused, not ignored."""
    if not isinstance(body, dict):
        raise ApiError("invalid_body", "Send a JSON object.")
    unknown = sorted(set(body) - TURN_FIELDS)
    if unknown:
        raise ApiError("unknown_field", f"Unknown field: {unknown[0]}.")
    turn_id = _identifier(body, "turn_id")
    session_id = _identifier(body, "session_id")
    source = _identifier(body, "source")
    model = body.get("model")
    if model is not None and (not isinstance(model, str) or len(model) > MAX_MODEL_CHARS):
        raise ApiError("invalid_model", f"model must be a string of at most"
                          f" {MAX_MODEL_CHARS} characters.")
    raw_messages = body.get("messages")
    if not isinstance(raw_messages, list) or not raw_messages:
        raise ApiError("invalid_messages", "messages must be a non-empty list.")
    if len(raw_messages) > MAX_MESSAGES:
        raise ApiError("too_many_messages", f"A turn holds at most {MAX_MESSAGES} messages.")
    messages = [_message(raw, i) for i, raw in enumerate(raw_messages)]
    extract = body.get("extract_memories", True)
    if not isinstance(extract, bool):
        raise ApiError("invalid_extract_memories", "extract_memories must be true or false.")
    metadata = body.get("metadata", {})
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        raise ApiError("invalid_metadata", "metadata must be a JSON object.")
    if len(json.dumps(metadata, ensure_ascii=False).encode("utf-8")) > MAX_METADATA_BYTES:
        raise ApiError("metadata_too_large",
                          f"metadata is limited to {MAX_METADATA_BYTES} bytes of JSON.")
    replace = body.get("replace_reply", False)
    if not isinstance(replace, bool):
        raise ApiError("invalid_replace_reply", "replace_reply must be true or false.")
    if replace and messages[-1].role != "assistant":
        raise ApiError("invalid_replace_reply",
                          "replace_reply needs the turn's last message to be the assistant's"
                          " reply.")
    return Turn(turn_id=turn_id, session_id=session_id, source=source, messages=messages,
                model=model or None, occurred_at=parse_occurred_at(body.get("occurred_at")),
                extract_memories=extract, metadata=metadata, replace_reply=replace)


def rows_for(turn: Turn) -> list[NewMessage]:
    """Rows to insert; with ``occurred_at`` each message gets it plus a microsecond per
    position, so the turn sorts where it happened and in its own order."""
    rows = []
    for position, message in enumerate(turn.messages):
        metadata = dict(message.metadata)
        if position == 0:
            metadata["turn"] = {"turn_id": turn.turn_id, "metadata": turn.metadata,
                                "messages": len(turn.messages)}
        created = (turn.occurred_at + timedelta(microseconds=position)
                   if turn.occurred_at is not None else None)
        rows.append(NewMessage(role=message.role, content=message.text, model=turn.model,
                               metadata=metadata, created_at=created))
    return rows


async def ingest_turn(store: TurnStore, turn: Turn, *, settings: Settings) -> IngestResult:
    """Store ``turn`` once; see the module docstring."""
    database = require_database(store.database)
    indexed = bool(settings.CONVERSATION_RECALL_ENABLED)
    terms = await conversation_index.terms_for(store.recall, [m.text for m in turn.messages]) \
        if indexed else None
    async with transaction(database.pool) as cur:
        await turns_db.lock_session_writes(cur, turn.session_id)
        found = await turns_db.find_turn(cur, turn.source, turn.session_id, turn.turn_id)
        if found is not None:
            replaced = (await replace_final_reply(store.recall, settings, cur, found,
                                                  turn.messages[-1].text)
                        if turn.replace_reply else None)
            if replaced is None:
                return IngestResult(status="duplicate")
            return IngestResult(status="replaced", message_ids=[replaced])
        ids = await insert_messages(cur, turn.session_id, rows_for(turn), source=turn.source)
        await turns_db.tag_turn(cur, ids[0], turn.turn_id)
        queued = await index_and_schedule(
            store.recall, cur, settings, turn.session_id,
            [(message_id, message.text) for message_id, message in zip(
                ids, turn.messages, strict=True)], terms=terms, extract=turn.extract_memories)
    if queued.any:
        store.jobs.wake()
    log.debug("stored a %d-message turn from %s", len(ids), turn.source)
    return IngestResult(status="stored", message_ids=ids, extraction_job=queued.extraction_job)
