"""Reading the extraction model's answer: tolerant JSON parsing, strict item validation."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pawwake.memory.model_terms import ModelTerms
from pawwake.text.model_json import AnswerNotJson, json_in_answer
from pawwake.text.numbers import whole_number

ACTIONS = ("new", "duplicate", "supersede")

# Items about the memory machinery or the chat itself are never stored as facts about the user.
_META_TALK = re.compile(
    r"记忆系统|记忆库|长期记忆|记忆功能|提取记忆|系统提示|提示词|本次对话|这次对话|这段对话|当前对话|"
    r"memory system|long[- ]term memory|memory (?:bank|store|database)|system prompt|"
    r"this conversation|the conversation (?:is|was)|the assistant(?:'s)? (?:instructions|prompt)",
    re.IGNORECASE)


LOGGED_ANSWER_BYTES = 2048  # how much of an unusable model answer a warning log shows


def answer_excerpt(text: str, limit: int = LOGGED_ANSWER_BYTES) -> str:
    """The head of a model's answer for a warning log: at most ``limit`` UTF-8 bytes, cut on
    a character boundary, marked when cut."""
    raw = text.encode("utf-8", "replace")
    if len(raw) <= limit:
        return text
    return raw[:limit].decode("utf-8", "ignore") + f" [... {len(raw) - limit} more bytes]"


class ExtractionAnswerError(ValueError):
    """The model's answer is not the JSON we asked for."""


@dataclass
class ExtractedItem:
    content: str
    importance: int
    action: str
    candidate_id: int | None
    remind_at: datetime | None
    source_refs: list[int] = field(default_factory=list)
    terms: ModelTerms = field(default_factory=ModelTerms)  # keywords and questions, both languages


def is_meta_talk(text: str) -> bool:
    return bool(_META_TALK.search(text))


def _json_payload(text: str) -> Any:
    try:
        return json_in_answer(text, "{[")
    except AnswerNotJson as exc:
        raise ExtractionAnswerError(str(exc)) from None


def parse_answer(text: str) -> list[ExtractedItem]:
    """Items from ``{"memories": [...]}`` (or a bare list). Malformed JSON raises; individual
    malformed items are dropped, since the rest of the answer is still good."""
    payload = _json_payload(text)
    if isinstance(payload, dict):
        payload = payload.get("memories")
    if not isinstance(payload, list):
        raise ExtractionAnswerError("expected a list of memories")
    items = []
    for raw in payload:
        item = _item(raw)
        if item is not None and not is_meta_talk(item.content):
            items.append(item)
    return items


def _item(raw: Any) -> ExtractedItem | None:
    if not isinstance(raw, dict):
        return None
    content = raw.get("content")
    if not isinstance(content, str) or not content.strip():
        return None
    importance = raw.get("importance", 5)
    if isinstance(importance, bool) or not isinstance(importance, (int, float)):
        importance = 5
    action = raw["action"] if raw.get("action") in ACTIONS else "new"
    candidate = raw.get("candidate_id")
    if isinstance(candidate, str):
        candidate = whole_number(candidate.strip())
    if isinstance(candidate, bool) or not isinstance(candidate, int):
        candidate = None
    if action != "new" and candidate is None:
        action = "new"
    refs = raw.get("source_refs") or []
    return ExtractedItem(
        content=content.strip(),
        importance=min(10, max(1, round(importance))),
        action=action,
        candidate_id=candidate,
        remind_at=_aware_time(raw.get("remind_at")),
        source_refs=[r for r in refs if isinstance(r, int) and not isinstance(r, bool)]
        if isinstance(refs, list) else [],
        terms=ModelTerms.of(raw))


def _aware_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None
