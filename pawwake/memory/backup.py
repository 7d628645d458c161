"""JSON backup: export every memory with its links, repair dangling links, import a backup.

An import validates the whole file first, then runs in one transaction: rows with identical
content and layer map to the existing row, the rest are inserted, and links are rewritten to
the new ids. Importing the same file again changes nothing. A dry run performs the same work
and rolls it back, so the preview is exactly what a real import would do.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pawwake.database import require_database
from pawwake.db import memories as db
from pawwake.db.memory_rows import DanglingLink, MemoryRow, NewMemory
from pawwake.db.pool import Cursor, cursor, transaction
from pawwake.memory.backup_format import (
    BackupInvalid,
    BackupItem,
    export_document,
    validate_backup,
)
from pawwake.memory.describe import enqueue_describing
from pawwake.memory.embedding_jobs import enqueue_embedding
from pawwake.memory.store import MemoryConflict
from pawwake.search.terms import terms_for

if TYPE_CHECKING:
    from pawwake.database import Database
    from pawwake.memory.faces import MemoryWrites

log = logging.getLogger(__name__)

MAX_CONFLICT_DETAILS = 100
_COMPARED = ("importance", "title", "is_active", "event_date", "remind_at",
             "reminder_delivered_at", "external_id")

__all__ = ["BackupInvalid", "BrokenLinks", "export_backup", "import_backup", "repair_links"]


class BrokenLinks(MemoryConflict):
    """Export refused: some merge/supersede links name rows that no longer exist."""

    def __init__(self, broken: list[DanglingLink]) -> None:
        super().__init__("broken_links", f"{len(broken)} memories link to memories that no "
                         "longer exist; repair the links (POST /api/memories/repair-links) "
                         "and export again.", broken=broken)
        self.broken = broken


class _RollBack(Exception):
    """Raised at the end of a dry run so the transaction's work is undone."""


async def database_identity(database: Database) -> str:
    async with cursor(database.pool) as cur:
        return await db.source_database_id(cur, secrets.token_hex(16))


async def export_backup(database: Database) -> dict[str, Any]:
    """Every memory in one consistent snapshot; refuses while links dangle."""
    identity = await database_identity(database)
    async with transaction(database.pool) as cur:
        await cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        broken = await db.dangling_links(cur)
        if broken:
            raise BrokenLinks(broken)
        rows = await db.all_memories(cur)
    return export_document(rows, identity, datetime.now(UTC))


async def repair_links(database: Database) -> dict[str, Any]:
    """Drop references to missing rows (the memories that held them stay as they are)."""
    async with transaction(database.pool) as cur:
        broken = await db.dangling_links(cur)
        for row in broken:
            await db.clear_links(cur, row["id"], row["missing_sources"],
                                 row["missing_successor"] is not None)
    sources = sum(len(row["missing_sources"]) for row in broken)
    successors = sum(row["missing_successor"] is not None for row in broken)
    if broken:
        log.info("repaired links of %s memories (%s sources, %s successors)", len(broken),
                 sources, successors)
    return {"repaired": len(broken), "removed_sources": sources,
            "cleared_successors": successors, "memory_ids": [row["id"] for row in broken]}


async def import_backup(writes: MemoryWrites, data: Any, *, dry_run: bool) -> dict[str, Any]:
    """Validate, then import in one transaction; report ``{imported, skipped, conflicts}``."""
    version, items, header = validate_backup(data)
    terms = await terms_for(writes.data_dir, [item.content for item in items])
    identity = await database_identity(require_database(writes.database))
    report: dict[str, Any] = {}
    try:
        async with transaction(require_database(writes.database).pool) as cur:
            await db.lock_memory_imports(cur)
            report = await _apply(cur, items, terms, version)
            if report["imported"]:
                await enqueue_embedding(cur)
                await enqueue_describing(cur, writes.config.current())
            if dry_run:
                raise _RollBack
    except _RollBack:
        pass
    report.update(schema_version=version, dry_run=dry_run,
                  same_database=header["source_database_id"] == identity)
    if report["imported"] and not dry_run:
        writes.jobs.wake()
        log.info("backup import: %s imported, %s skipped, %s conflicts", report["imported"],
                 report["skipped"], report["conflicts"])
    return report


async def _apply(cur: Cursor, items: list[BackupItem], terms: list[list[str]], version: int
                 ) -> dict[str, Any]:
    existing_by_key: dict[tuple[str, int], list[MemoryRow]] = {}
    for stored in await db.rows_with_contents(cur, sorted({item.content for item in items})):
        existing_by_key.setdefault((stored["content"], stored["layer"]), []).append(stored)
    wanted_external = sorted({i.external_id for i in items if i.external_id is not None})
    taken_external = {stored["external_id"]
                      for stored in await db.rows_with_external_ids(cur, wanted_external)}

    target: dict[int | str, int] = {}  # backup id -> memory id
    matched: dict[int | str, MemoryRow] = {}  # backup id -> existing row it maps to
    repeats: dict[int | str, int | str] = {}  # backup id -> the first with its content
    first_of_key: dict[tuple[str, int], BackupItem] = {}
    new_items: list[BackupItem] = []
    new_rows: list[NewMemory] = []
    conflicts: list[dict[str, Any]] = []
    for item, item_terms in zip(items, terms, strict=True):
        key = (item.content, item.layer)
        if key in first_of_key:  # the file repeats a memory: one row for both
            repeats[item.backup_id] = first_of_key[key].backup_id
            continue
        first_of_key[key] = item
        candidates = existing_by_key.get(key, [])
        if candidates:
            same = [r for r in candidates if r["external_id"] == item.external_id]
            matched[item.backup_id] = (same or candidates)[0]
            continue
        row: NewMemory = {**item.row(), "search_terms": item_terms}
        if item.external_id in taken_external:
            row["external_id"] = None
            conflicts.append({"backup_id": item.backup_id, "reason": "external_id_in_use",
                              "detail": "Another memory already uses this external_id; "
                                        "imported without it."})
        new_items.append(item)
        new_rows.append(row)

    inserted = await db.insert_memories(cur, new_rows)
    if len(inserted) != len(new_rows):
        raise MemoryConflict("concurrent_change", "Memories were added with the same "
                             "external_id during the import; run it again.")
    for item, new in zip(new_items, inserted, strict=True):
        target[item.backup_id] = new["id"]
    for backup_id, existing in matched.items():
        target[backup_id] = existing["id"]
    for backup_id, first in repeats.items():
        target[backup_id] = target[first]

    for item in new_items:
        if item.merged_from or item.superseded_by is not None:
            await db.set_links(cur, target[item.backup_id],
                               list(dict.fromkeys(target[s] for s in item.merged_from)),
                               target.get(item.superseded_by) if item.superseded_by is not None
                               else None)
    by_backup_id = {item.backup_id: item for item in items}
    for backup_id, existing in matched.items():
        differences = _differences(by_backup_id[backup_id], existing, target, version)
        if differences:
            conflicts.append({"backup_id": backup_id, "memory_id": existing["id"],
                              "reason": "differs_from_existing", "fields": differences,
                              "detail": "Kept the stored memory as it is."})
    return {"imported": len(inserted), "skipped": len(items) - len(inserted),
            "conflicts": len(conflicts), "conflict_details": conflicts[:MAX_CONFLICT_DETAILS]}


def _differences(item: BackupItem, row: MemoryRow, target: dict[int | str, int],
                 version: int) -> list[str]:
    """Fields the file states that disagree with the stored row it was mapped to."""
    stored: Mapping[str, object] = row
    fields = [name for name in _COMPARED
              if name in item.given and getattr(item, name) != stored[name]]
    if version >= 2 and sorted({target[s] for s in item.merged_from}) != sorted(
            set(row["merged_from"])):
        fields.append("merged_from")
    successor = target.get(item.superseded_by) if item.superseded_by is not None else None
    if version >= 3 and successor != row["superseded_by"]:
        fields.append("superseded_by")
    return fields
