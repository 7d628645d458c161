"""Pure helpers of consolidation: local days, batches and halving, the prompt, reading and
checking the model's groups, draft building and the fingerprints that detect changed sources.

No I/O here, so every rule can be unit-tested without a server.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date
from typing import Any, TypedDict

from pawwake.db.memory_rows import MemoryRow
from pawwake.local_time import zone_at
from pawwake.text.model_json import AnswerNotJson, json_in_answer
from pawwake.text.numbers import whole_number

CONSOLIDATE_KIND = "memory_consolidate"
PROMPT_CHAR_LIMIT = 12000  # a longer prompt is halved before it is sent
TITLE_MAX_CHARS = 10
EVENT_LAYER = 2
CORE_LAYER = 3

_LINE_BREAKS = re.compile(r"\s*\n\s*")
_DRAFT_ID = re.compile(r"^(\d{1,18})-(\d{1,6})$")
_LIST_KEYS = ("events", "groups", "drafts", "items")


class AnswerUnreadable(ValueError):
    """The answer is not the JSON array we asked for (a repair call may fix it)."""


class CoverageError(ValueError):
    """The groups do not cover the batch exactly (the batch is halved and asked again)."""


@dataclass(frozen=True)
class Group:
    """One event the model proposed, with positions (0-based) into the batch."""

    title: str | None
    content: str
    importance: int | None
    positions: tuple[int, ...]


# --- dates and batches ---------------------------------------------------------------------

def local_date(row: MemoryRow, tz_hours: float) -> date:
    """``event_date`` when set, else the local calendar date of ``created_at``."""
    if row["event_date"] is not None:
        return row["event_date"]
    return row["created_at"].astimezone(zone_at(tz_hours)).date()


def batches_by_day(rows: Sequence[MemoryRow], tz_hours: float) -> list[dict[str, Any]]:
    """One batch per local day, days and items in order: ``{"day": "YYYY-MM-DD", "ids"}``."""
    days: dict[date, list[MemoryRow]] = {}
    for row in rows:
        days.setdefault(local_date(row, tz_hours), []).append(row)
    return [{"day": day.isoformat(), "ids": [r["id"] for r in _in_order(items, tz_hours)]}
            for day, items in sorted(days.items())]


def _in_order(rows: Iterable[MemoryRow], tz_hours: float) -> list[MemoryRow]:
    return sorted(rows, key=lambda r: (local_date(r, tz_hours), r["created_at"], r["id"]))


def selection_batch(rows: Sequence[MemoryRow], tz_hours: float) -> dict[str, Any]:
    """A selection is one batch (halved later if it is too big), oldest first."""
    return {"day": None, "ids": [r["id"] for r in _in_order(rows, tz_hours)]}


def halve(batch: dict[str, Any]) -> list[dict[str, Any]]:
    """Two batches with the first and second half of the items (order kept)."""
    ids = batch["ids"]
    middle = len(ids) // 2
    return [{**batch, "ids": ids[:middle]}, {**batch, "ids": ids[middle:]}]


# --- prompts -------------------------------------------------------------------------------

def render_prompt(template: str, rows: Sequence[MemoryRow], tz_hours: float) -> str:
    """The grouping prompt: items numbered 1..n (ids stay ours; numbers are the model's)."""
    lines = []
    for number, row in enumerate(rows, 1):
        text = _LINE_BREAKS.sub(" ", row["content"].strip())
        lines.append(f"{number}. [{local_date(row, tz_hours).isoformat()}]"
                     f" (importance {row['importance']}) {text}")
    # The items go in last so text inside them is never taken for a placeholder.
    return template.replace("{count}", str(len(rows))).replace("{items}", "\n".join(lines))


def render_repair(template: str, answer_text: str) -> str:
    """The JSON repair prompt, carrying the whole unreadable answer (never cut)."""
    return template.replace("{text}", answer_text)


def is_truncated(finish_reason: str | None, completion_tokens: int | None,
                 max_tokens: int) -> bool:
    """The answer stopped at the output cap: by the finish reason or by the token count."""
    if finish_reason == "length":
        return True
    return completion_tokens is not None and completion_tokens >= max_tokens


# --- reading the answer --------------------------------------------------------------------

def _json_payload(text: str) -> Any:
    try:
        return json_in_answer(text, "[")
    except AnswerNotJson as exc:
        raise AnswerUnreadable(str(exc)) from None


def parse_groups(text: str) -> list[Any]:
    """The raw list of groups from the answer (a bare array, or one wrapped in an object)."""
    payload = _json_payload(text)
    if isinstance(payload, dict):
        for key in _LIST_KEYS:
            if isinstance(payload.get(key), list):
                payload = payload[key]
                break
    if not isinstance(payload, list):
        raise AnswerUnreadable("expected a JSON array of groups")
    return payload


def _number(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        return whole_number(value.strip())
    return None


def clip_title(value: Any) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return None
    return value.strip()[:TITLE_MAX_CHARS].strip() or None


def check_coverage(raw_groups: Sequence[Any], count: int) -> list[Group]:
    """Groups whose merged_ids cover 1..count exactly once; anything else raises."""
    seen: set[int] = set()
    groups: list[Group] = []
    for index, raw in enumerate(raw_groups, 1):
        if not isinstance(raw, dict):
            raise CoverageError(f"group {index} is not an object")
        content = raw.get("content")
        if not isinstance(content, str) or not content.strip():
            raise CoverageError(f"group {index} has empty content")
        merged = raw.get("merged_ids")
        if not isinstance(merged, list) or not merged:
            raise CoverageError(f"group {index} lists no merged_ids")
        positions = []
        for value in merged:
            number = _number(value)
            if number is None or not 1 <= number <= count:
                raise CoverageError(f"group {index} names an item that was not given: {value!r}")
            if number in seen:
                raise CoverageError(f"item {number} appears more than once")
            seen.add(number)
            positions.append(number - 1)
        importance = _number(raw.get("importance"))
        groups.append(Group(
            title=clip_title(raw.get("title")), content=content.strip(),
            importance=None if importance is None else min(10, max(1, importance)),
            positions=tuple(positions)))
    missing = sorted(set(range(1, count + 1)) - seen)
    if missing:
        raise CoverageError(f"items left out: {missing[:10]}")
    return groups


# --- drafts and fingerprints ---------------------------------------------------------------

def source_version(row: MemoryRow) -> str:
    """A short hash of what a merge depends on: text, layer, state and reminder."""
    remind = row["remind_at"]
    remind_text = remind.astimezone(UTC).isoformat() if remind else None
    material = json.dumps([row["id"], row["content"], row["layer"], row["is_active"],
                           remind_text], ensure_ascii=False)
    return hashlib.sha256(material.encode("utf-8")).hexdigest()[:16]


def fingerprint(versions: dict[int, str]) -> str:
    """One value for a set of sources, independent of their order."""
    material = ",".join(f"{key}:{versions[key]}" for key in sorted(versions))
    return hashlib.sha256(material.encode("ascii")).hexdigest()[:32]


def target_layer(layers: Iterable[int]) -> int:
    """A merge makes at least an event, and never less than its highest source."""
    return max(EVENT_LAYER, *layers)


class DraftSource(TypedDict):
    """A source as a draft shows it and a confirm checks it (``version``)."""

    id: int
    content: str
    title: str | None
    layer: int
    importance: int
    local_date: str
    version: str


def build_draft(group: Group, rows: Sequence[MemoryRow], tz_hours: float,
                day: str | None) -> dict[str, Any]:
    """A JSON-ready draft: what the UI shows and what a confirm checks against."""
    picked = _in_order((rows[p] for p in group.positions), tz_hours)
    sources = [DraftSource(id=r["id"], content=r["content"], title=r["title"],
                           layer=r["layer"], importance=r["importance"],
                           local_date=local_date(r, tz_hours).isoformat(),
                           version=source_version(r)) for r in picked]
    versions = {s["id"]: s["version"] for s in sources}
    title = group.title or clip_title(group.content)
    return {
        "source_ids": sorted(versions),
        "sources": sources,
        "title": title,
        "content": group.content,
        "importance": group.importance or max(r["importance"] for r in picked),
        "layer": target_layer(r["layer"] for r in picked),
        "includes_core": any(r["layer"] == CORE_LAYER for r in picked),
        "event_date": min(s["local_date"] for s in sources),
        "day": day,
        "fingerprint": fingerprint(versions),
    }


def draft_id(job_id: int, number: int) -> str:
    return f"{job_id}-{number}"


def parse_draft_id(value: str) -> tuple[int, int] | None:
    """(job id, draft number) from ``"12-3"``; None when it is not one of ours."""
    match = _DRAFT_ID.match(value)
    return (int(match.group(1)), int(match.group(2))) if match else None
