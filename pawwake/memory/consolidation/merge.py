"""Merging memories: confirming a draft or a manual merge, reverting a merge, the sources of a
merged memory, the state of drafts, and core candidates.

A merge is one transaction: the sources are locked in id order, re-checked (still there,
active, no reminder waiting, unchanged since the draft), the merged memory is inserted and the
sources are archived. Two confirms of one draft therefore make one event: the second finds the
sources archived. A revert restores every source and archives the merged memory, or changes
nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from pawwake.database import require_database
from pawwake.db import consolidation as db
from pawwake.db import memories as memories_db
from pawwake.db.errors import NotFound
from pawwake.db.memory_rows import MemoryRow
from pawwake.db.pool import Cursor, cursor, transaction
from pawwake.memory.consolidation import parse
from pawwake.memory.consolidation.parse import CONSOLIDATE_KIND, CORE_LAYER
from pawwake.memory.describe import enqueue_describing
from pawwake.memory.embedding_jobs import enqueue_embedding
from pawwake.memory.fields import FieldError
from pawwake.memory.store import LAYER_NAMES, MemoryConflict, memory_json
from pawwake.search.terms import terms_for

if TYPE_CHECKING:
    from pawwake.database import Database
    from pawwake.memory.faces import MemoryWrites
    from pawwake.settings import Settings

log = logging.getLogger(__name__)

CANDIDATE_MIN_SOURCES = 3
CANDIDATE_MIN_IMPORTANCE = 8
CANDIDATE_LIMIT = 20


class DetailedConflict(MemoryConflict):
    """A 409 of consolidation and merges (its details name the ids, the merged memory...);
    the dashboard's consolidation dialog answers these."""


@dataclass
class MergeRequest:
    """What a caller asked for; None means "as in the draft" (or the default)."""

    source_ids: list[int] | None = None
    content: str | None = None
    title: str | None = None
    title_given: bool = False
    importance: int | None = None
    layer: int | None = None
    draft_id: str | None = None
    expected: str | None = None
    confirm_core: bool = False


# --- drafts --------------------------------------------------------------------------------

async def find_draft(database: Database, draft_id: str) -> dict[str, Any]:
    """A draft made by a finished draft job (404 when there is no such draft)."""
    parsed = parse.parse_draft_id(draft_id)
    async with cursor(database.pool) as cur:
        draft = (await db.finished_draft(cur, CONSOLIDATE_KIND, parsed[0], draft_id)
                 if parsed else None)
    if draft is None:
        raise NotFound(f"No draft {draft_id!r}; make new drafts.")
    return dict(draft)


async def draft_states(database: Database, drafts: list[dict[str, Any]]
                       ) -> list[dict[str, Any]]:
    """Each draft with ``state``: ``confirmed`` (and ``merged_id``), ``stale`` (a source changed
    since the draft was made; ``changed_ids``) or ``ready``."""
    ids = sorted({i for d in drafts for i in d["source_ids"]})
    if not ids:
        return []
    async with cursor(database.pool) as cur:
        current = {r["id"]: r for r in await db.rows_by_ids(cur, ids, 0)}
        holders = await db.merges_holding(cur, ids)
    shown = []
    for draft in drafts:
        wanted = set(draft["source_ids"])
        merged = next((h["id"] for h in holders if set(h["merged_from"]) == wanted), None)
        changed = _changed_sources(draft, current)
        if merged is not None:
            shown.append({**draft, "state": "confirmed", "merged_id": merged})
        elif changed:
            shown.append({**draft, "state": "stale", "changed_ids": changed})
        else:
            shown.append({**draft, "state": "ready"})
    return shown


def _changed_sources(draft: dict[str, Any], current: Mapping[int, MemoryRow]) -> list[int]:
    return sorted(s["id"] for s in draft["sources"]
                  if s["id"] not in current or parse.source_version(current[s["id"]])
                  != s["version"])


# --- merge ---------------------------------------------------------------------------------

async def merge_memories(writes: MemoryWrites, request: MergeRequest, *, settings: Settings
                         ) -> dict[str, Any]:
    """Confirm a draft (``draft_id``) or merge chosen memories; see the module docstring."""
    tz_hours = settings.TIMEZONE_HOURS
    draft = await find_draft(require_database(writes.database),
                             request.draft_id) if request.draft_id else None
    source_ids = _source_ids(request, draft)
    content = request.content or (draft["content"] if draft else None)
    if content is None:
        raise FieldError("content", "'content' is required for a merge.", "missing_field")
    title = request.title if request.title_given or draft is None else draft["title"]
    [terms] = await terms_for(writes.data_dir, [content])
    async with transaction(require_database(writes.database).pool) as cur:
        rows = await memories_db.lock_memories(cur, source_ids)
        await _check_sources(cur, request, draft, source_ids, rows)
        floor = parse.target_layer(r["layer"] for r in rows)
        layer = request.layer or (draft["layer"] if draft else floor)
        if layer < floor:
            raise FieldError("layer", f"A merge of these memories must be at least layer "
                             f"{floor} ({LAYER_NAMES[floor]}).", "layer_below_sources")
        importance = (request.importance or (draft["importance"] if draft else None)
                      or max(r["importance"] for r in rows))
        merged = await db.insert_merged(
            cur, content=content, title=title, importance=importance, layer=layer,
            event_date=min(parse.local_date(r, tz_hours) for r in rows),
            merged_from=source_ids, search_terms=terms)
        archived = await memories_db.archive_memories(cur, source_ids)
        await enqueue_embedding(cur)
        await enqueue_describing(cur, writes.config.current())
    writes.jobs.wake()
    log.info("merged %s memories into %s (layer %s)", len(archived), merged["id"], layer)
    return {"memory": memory_json(merged), "archived_ids": archived,
            "draft_id": request.draft_id}


def _source_ids(request: MergeRequest, draft: dict[str, Any] | None) -> list[int]:
    if draft is not None:
        if request.source_ids is not None and sorted(request.source_ids) != draft["source_ids"]:
            raise FieldError("source_ids", "'source_ids' differ from the draft's sources; leave "
                             "them out or make a manual merge without draft_id.",
                             "draft_sources_mismatch")
        return list(draft["source_ids"])
    if request.source_ids is None or len(request.source_ids) < 2:
        raise FieldError("source_ids", "A merge needs at least 2 memories in 'source_ids'.",
                         "too_few_sources")
    return sorted(request.source_ids)


async def _check_sources(cur: Cursor, request: MergeRequest, draft: dict[str, Any] | None,
                         source_ids: list[int], rows: list[MemoryRow]) -> None:
    """Refuse (and so roll back) unless every source may be merged right now."""
    found = {r["id"]: r for r in rows}
    missing = [i for i in source_ids if i not in found]
    if missing and draft is None:
        raise NotFound(f"No memory with id {', '.join(map(str, missing))}.")
    inactive = [r["id"] for r in rows if not r["is_active"]]
    if inactive:
        holders = [h for h in await db.merges_holding(cur, inactive) if h["is_active"]]
        if holders:
            raise DetailedConflict("already_merged", "These memories were merged already "
                                   f"(into memory {holders[0]['id']}).", ids=inactive,
                                   merged_id=holders[0]["id"])
        raise DetailedConflict("source_archived", "Some sources are archived; restore them "
                               "or make new drafts.", ids=inactive)
    expected = request.expected or (draft["fingerprint"] if draft else None)
    if expected is not None:
        versions = {r["id"]: parse.source_version(r) for r in rows}
        if missing or parse.fingerprint(versions) != expected:
            changed = (_changed_sources(draft, found) if draft
                       else sorted(set(missing) | set(found)))
            raise DetailedConflict("source_changed", "Some sources changed since the draft was "
                                   "made; review them and make new drafts.", ids=changed)
    waiting = [r["id"] for r in rows
               if r["remind_at"] is not None and r["reminder_delivered_at"] is None]
    if waiting:
        raise DetailedConflict("source_has_reminder", "Some sources have a reminder that has "
                               "not been delivered yet.", ids=waiting)
    core = [r["id"] for r in rows if r["layer"] == CORE_LAYER]
    if core and not request.confirm_core:
        raise DetailedConflict("core_confirmation_required", "This merge would archive a core "
                               'memory; confirm it on its own with "confirm_core": true.',
                               ids=core)


# --- revert and sources --------------------------------------------------------------------

async def revert_merge(writes: MemoryWrites, memory_id: int, *, settings: Settings
                       ) -> dict[str, Any]:
    """Restore every source and archive the merged memory; afterwards it is no longer a merge."""
    async with transaction(require_database(writes.database).pool) as cur:
        first = await memories_db.get_memory(cur, memory_id)
        if first is None:
            raise NotFound(f"No memory with id {memory_id}.")
        source_ids = list(first["merged_from"])
        # Lock the merged row and its sources together, in id order (no deadlock with merges).
        locked = {r["id"]: r for r in await memories_db.lock_memories(cur,
                                                                      [memory_id, *source_ids])}
        merged = locked.get(memory_id)
        if merged is None or list(merged["merged_from"]) != source_ids:
            raise DetailedConflict("merge_changed", "The merge changed meanwhile; reload.")
        sources = [locked[i] for i in source_ids if i in locked]
        blocker = await _revert_blocker(cur, merged, sources)
        if blocker is not None:
            raise DetailedConflict(blocker["code"], blocker["message"], **blocker["details"])
        restored_ids = await memories_db.restore_memories(cur, source_ids)
        archived = await db.end_merge(cur, memory_id)
        restored = await db.rows_by_ids(cur, source_ids, settings.TIMEZONE_HOURS)
    log.info("reverted merge %s: %s sources restored", memory_id, len(restored_ids))
    return {"archived": memory_json(archived),
            "restored": [memory_json(r) for r in restored],
            "restored_ids": restored_ids}


async def _revert_blocker(cur: Cursor, merged: MemoryRow, sources: Sequence[MemoryRow]
                          ) -> dict[str, Any] | None:
    """Why this merge cannot be reverted now (None when it can)."""
    source_ids = list(merged["merged_from"])
    if not source_ids:
        return _blocker("not_merged", f"Memory {merged['id']} is not a merge (or its merge was "
                        "reverted already).")
    missing = sorted(set(source_ids) - {s["id"] for s in sources})
    if missing:
        return _blocker("source_missing", "Some sources were deleted; the merge cannot be "
                        "reverted.", ids=missing)
    holders = await db.merges_holding(cur, [merged["id"], *source_ids])
    parents = [h["id"] for h in holders if merged["id"] in h["merged_from"]]
    if parents:
        return _blocker("merged_again", f"Memory {merged['id']} was merged into memory "
                        f"{parents[0]}; revert that merge first.", merged_id=parents[0])
    elsewhere = sorted({s for h in holders if h["id"] != merged["id"]
                        for s in h["merged_from"] if s in source_ids})
    if elsewhere:
        return _blocker("source_merged_elsewhere", "Some sources belong to another merge now; "
                        "revert that one first.", ids=elsewhere)
    replaced = [s["id"] for s in sources if s["superseded_by"] is not None]
    if replaced:
        return _blocker("source_superseded", "Some sources were replaced by newer versions.",
                        ids=replaced)
    return None


def _blocker(code: str, message: str, **details: Any) -> dict[str, Any]:
    return {"code": code, "message": message, "details": details}


async def sources_of(database: Database, memory_id: int, *, settings: Settings
                     ) -> dict[str, Any]:
    """The sources of a merged memory, oldest first, and whether a revert would work now."""
    async with cursor(database.pool) as cur:
        memory = await memories_db.get_memory(cur, memory_id)
        if memory is None:
            raise NotFound(f"No memory with id {memory_id}.")
        source_ids = list(memory["merged_from"])
        sources = (await db.rows_by_ids(cur, source_ids, settings.TIMEZONE_HOURS)
                   if source_ids else [])
        blocker = await _revert_blocker(cur, memory, sources)
    return {
        "memory": memory_json(memory),
        "merged": bool(source_ids),
        "sources": [memory_json(s) for s in sources],
        "missing_ids": sorted(set(source_ids) - {s["id"] for s in sources}),
        "can_revert": blocker is None,
        "revert_blocker": None if blocker is None else {
            "code": blocker["code"], "message": blocker["message"], **blocker["details"]},
    }


# --- core candidates -----------------------------------------------------------------------

async def core_candidates(database: Database, limit: int = CANDIDATE_LIMIT
                          ) -> list[dict[str, Any]]:
    """Events worth promoting to core, with the reasons; nothing is promoted here."""
    async with cursor(database.pool) as cur:
        rows = await db.core_candidates(cur, min_sources=CANDIDATE_MIN_SOURCES,
                                        min_importance=CANDIDATE_MIN_IMPORTANCE,
                                        limit=min(limit, CANDIDATE_LIMIT))
    shown = []
    for row in rows:
        counts = {"source_count": row["source_count"],
                  "fragment_sources": row["fragment_sources"],
                  "event_sources": row["event_sources"]}
        memory = cast(MemoryRow, {k: v for k, v in row.items() if k not in counts})
        reasons = []
        if counts["source_count"] >= CANDIDATE_MIN_SOURCES:
            reasons.append({"code": "many_sources", "sources": counts["source_count"],
                            "fragments": counts["fragment_sources"],
                            "events": counts["event_sources"],
                            "text": _sources_text(counts)})
        if row["importance"] >= CANDIDATE_MIN_IMPORTANCE:
            reasons.append({"code": "high_importance", "importance": row["importance"],
                            "text": f"importance {row['importance']}"})
        shown.append({**memory_json(memory), "source_count": counts["source_count"],
                      "reasons": reasons})
    return shown


def _sources_text(counts: dict[str, int]) -> str:
    parts = []
    for key, singular in (("fragment_sources", "fragment"), ("event_sources", "event")):
        if counts[key]:
            parts.append(f"{counts[key]} {singular}{'s' if counts[key] != 1 else ''}")
    other = counts["source_count"] - counts["fragment_sources"] - counts["event_sources"]
    if other:
        parts.append(f"{other} other memor{'ies' if other != 1 else 'y'}")
    return "merged from " + " and ".join(parts)
