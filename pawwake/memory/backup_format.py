"""The JSON backup format: building an export document and validating a file before import.

Rows are named by backup ids inside a file, and merge/supersede links use those ids, so a
backup can be restored into any database. Versions: 1 has no links, 2 adds ``merged_from``,
3 adds ``superseded_by`` (version chains).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from pawwake.api_error import ApiError
from pawwake.db.memory_rows import MemoryRow, NewMemory
from pawwake.memory.fields import (
    FieldError,
    parse_bool,
    parse_content,
    parse_event_date,
    parse_external_id,
    parse_importance,
    parse_layer,
    parse_timestamp,
    parse_title,
)

SCHEMA_VERSION = 3
MAX_PROBLEMS = 20


@dataclass
class BackupItem:
    """One memory of a validated file, links still in backup ids."""

    backup_id: int | str
    content: str
    importance: int = 5
    layer: int = 1
    title: str | None = None
    is_active: bool = True
    event_date: date | None = None
    remind_at: datetime | None = None
    reminder_delivered_at: datetime | None = None
    created_at: datetime | None = None
    archived_at: datetime | None = None
    external_id: str | None = None
    source_session: str | None = None
    merged_from: list[int | str] = field(default_factory=list)
    superseded_by: int | str | None = None
    given: frozenset[str] = frozenset()  # the fields the file states (others are defaults)

    def row(self) -> NewMemory:
        """Insert values (links are set after every row has its new id)."""
        return {"content": self.content, "importance": self.importance, "layer": self.layer,
                "title": self.title, "is_active": self.is_active,
                "event_date": self.event_date, "remind_at": self.remind_at,
                "reminder_delivered_at": self.reminder_delivered_at,
                "created_at": self.created_at,
                "archived_at": self.archived_at if not self.is_active else None,
                "external_id": self.external_id, "source_session": self.source_session}


class BackupInvalid(ApiError):
    """The file cannot be imported (400 ``invalid_backup``); ``problems`` lists the first things
    wrong with it, the message the first three."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("invalid_backup", "The backup was not imported: "
                         + "; ".join(problems[:3]), problems=problems)
        self.problems = problems


def _iso(value: date | None) -> str | None:
    return value.isoformat() if value is not None else None


def export_document(rows: list[MemoryRow], source_database_id: str, exported_at: datetime
                    ) -> dict[str, Any]:
    """Rows in creation order -> a version-3 backup with backup ids 1..N."""
    backup_ids = {row["id"]: number for number, row in enumerate(rows, 1)}
    memories = []
    for row in rows:
        memories.append({
            "backup_id": backup_ids[row["id"]],
            "content": row["content"], "importance": row["importance"], "layer": row["layer"],
            "title": row["title"], "is_active": row["is_active"],
            "event_date": _iso(row["event_date"]), "remind_at": _iso(row["remind_at"]),
            "reminder_delivered_at": _iso(row["reminder_delivered_at"]),
            "created_at": _iso(row["created_at"]), "archived_at": _iso(row["archived_at"]),
            "merged_from": [backup_ids[i] for i in row["merged_from"]],
            "superseded_by": (backup_ids.get(row["superseded_by"])
                              if row["superseded_by"] is not None else None),
            "external_id": row["external_id"], "source_session": row["source_session"],
        })
    return {"schema_version": SCHEMA_VERSION, "source_database_id": source_database_id,
            "exported_at": exported_at.isoformat(), "memories": memories}


_ITEM_PARSERS: dict[str, Callable[[Any], Any]] = {
    "content": parse_content,
    "importance": parse_importance,
    "layer": parse_layer,
    "title": parse_title,
    "is_active": lambda v: parse_bool(v, "is_active"),
    "event_date": parse_event_date,
    "remind_at": lambda v: parse_timestamp(v, "remind_at"),
    "reminder_delivered_at": lambda v: parse_timestamp(v, "reminder_delivered_at"),
    "created_at": lambda v: parse_timestamp(v, "created_at"),
    "archived_at": lambda v: parse_timestamp(v, "archived_at"),
    "external_id": parse_external_id,
    "source_session": lambda v: _optional_string(v, "source_session"),
}


def _optional_string(value: Any, name: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise FieldError(name, f"'{name}' must be a string or null.")
    return value


def _backup_id(value: Any, name: str) -> int | str:
    if isinstance(value, bool) or not isinstance(value, (int, str)) or value == "" or (
            isinstance(value, str) and not value.strip()):
        raise FieldError(name, f"'{name}' must be a number or a non-empty string.")
    return value


def validate_backup(data: Any) -> tuple[int, list[BackupItem], dict[str, Any]]:
    """Check the WHOLE file; return (version, items, header) or raise BackupInvalid."""
    if not isinstance(data, dict):
        raise BackupInvalid(["The backup must be a JSON object."])
    version = data.get("schema_version")
    if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= 3:
        raise BackupInvalid(["schema_version must be 1, 2 or 3."])
    memories = data.get("memories")
    if not isinstance(memories, list):
        raise BackupInvalid(["'memories' must be a list."])
    problems: list[str] = []
    header = {name: data.get(name) for name in ("source_database_id", "exported_at")}
    for name, value in header.items():
        if value is not None and not isinstance(value, str):
            problems.append(f"'{name}' must be a string.")
    items = [_item(raw, number, version, problems) for number, raw in enumerate(memories)]
    valid = [item for item in items if item is not None]
    if not problems:
        _check_links(valid, problems)
    if problems:
        raise BackupInvalid(problems[:MAX_PROBLEMS])
    return version, valid, header


def _item(raw: Any, number: int, version: int, problems: list[str]) -> BackupItem | None:
    where = f"memories[{number}]"
    if not isinstance(raw, dict):
        problems.append(f"{where}: must be an object.")
        return None
    values: dict[str, Any] = {}
    try:
        values["backup_id"] = _backup_id(raw.get("backup_id"), "backup_id")
        if "content" not in raw:
            raise FieldError("content", "'content' is required.")
        for name, parse in _ITEM_PARSERS.items():
            if name in raw:
                values[name] = parse(raw[name])
        if version >= 2:
            sources = raw.get("merged_from", [])
            if not isinstance(sources, list):
                raise FieldError("merged_from", "'merged_from' must be a list of backup ids.")
            values["merged_from"] = [_backup_id(s, "merged_from") for s in sources]
        if version >= 3 and raw.get("superseded_by") is not None:
            values["superseded_by"] = _backup_id(raw["superseded_by"], "superseded_by")
    except FieldError as exc:
        problems.append(f"{where}: {exc.message}")
        return None
    return BackupItem(**values, given=frozenset(raw))


def _check_links(items: list[BackupItem], problems: list[str]) -> None:
    """Unique backup ids and external ids, link targets present, no cycles."""
    by_id: dict[int | str, BackupItem] = {}
    external: set[str] = set()
    for item in items:
        if item.backup_id in by_id:
            problems.append(f"backup_id {item.backup_id!r} appears more than once.")
        by_id[item.backup_id] = item
        if item.external_id is not None:
            if item.external_id in external:
                problems.append(f"external_id {item.external_id!r} appears more than once.")
            external.add(item.external_id)
    # Edges point from the older row to the newer: replaced -> replacement, source -> merged.
    newer: dict[int | str, list[int | str]] = {key: [] for key in by_id}
    for item in items:
        for source in item.merged_from:
            if source not in by_id:
                problems.append(f"backup_id {item.backup_id!r}: merged_from names "
                                f"{source!r}, which is not in the file.")
            else:
                newer[source].append(item.backup_id)
        if item.superseded_by is not None:
            if item.superseded_by not in by_id:
                problems.append(f"backup_id {item.backup_id!r}: superseded_by names "
                                f"{item.superseded_by!r}, which is not in the file.")
            else:
                newer[item.backup_id].append(item.superseded_by)
    if not problems:
        cycle = _find_cycle(newer)
        if cycle is not None:
            problems.append(f"links form a cycle through backup_id {cycle!r}.")


def _find_cycle(edges: dict[int | str, list[int | str]]) -> int | str | None:
    """A node on a cycle of ``edges``, or None (iterative depth-first search)."""
    state: dict[int | str, int] = {}  # 1 = on the current path, 2 = finished
    for start in edges:
        if state.get(start):
            continue
        stack = [(start, iter(edges[start]))]
        state[start] = 1
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                state[node] = 2
                stack.pop()
            elif state.get(child) == 1:
                return child
            elif not state.get(child):
                state[child] = 1
                stack.append((child, iter(edges[child])))
    return None
