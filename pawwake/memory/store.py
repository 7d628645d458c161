"""Memory storage rules: create, edit, archive/restore/delete, batches, promote, version chains.

Every multi-row change runs in one transaction with the rows locked, so a batch reports what it
really did. Rows in a version chain and merge sources that a revert still needs are never
deleted. After a commit that adds text or changes it, the embedding job is asked to run.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import date, datetime
from typing import TYPE_CHECKING, Any, TypedDict, cast

from pawwake.api_error import ApiError
from pawwake.database import require_database
from pawwake.db import memories as db
from pawwake.db.errors import NotFound
from pawwake.db.memory_rows import LayerCount, MemoryChanges, MemoryRow, NewMemory
from pawwake.db.pool import Cursor, cursor, transaction
from pawwake.memory import fresh_vectors
from pawwake.memory.describe import enqueue_describing, request_describing
from pawwake.memory.embedding_jobs import enqueue_embedding
from pawwake.search.terms import terms_for

if TYPE_CHECKING:
    from pawwake.database import Database
    from pawwake.memory.faces import MemoryWrites

log = logging.getLogger(__name__)

LAYER_NAMES = {1: "fragment", 2: "event", 3: "core"}
CORE_LAYER = 3


class MemoryConflict(ApiError):
    """A change refused because of the row's state (409), with a machine-readable code and
    optional details naming what is in the way."""

    def __init__(self, code: str, message: str, **details: Any) -> None:
        super().__init__(code, message, status=409, **details)


class UndoneSupersede(TypedDict):
    restored: MemoryRow
    archived: MemoryRow


def memory_json(row: MemoryRow) -> dict[str, object]:
    """A row as the API and MCP show it: its days and times in ISO 8601 (times with their
    offset), in the row's order."""
    shown: dict[str, object] = {}
    for name, value in row.items():
        if name == "search_terms":
            continue
        if isinstance(value, (datetime, date)):
            value = value.isoformat()
        shown[name] = value
    return shown


# --- single rows -------------------------------------------------------------------------

async def get_memory(database: Database, memory_id: int) -> MemoryRow:
    async with cursor(database.pool) as cur:
        row = await db.get_memory(cur, memory_id)
    if row is None:
        raise NotFound(f"No memory with id {memory_id}.")
    return row


async def create_memory(writes: MemoryWrites, fields: NewMemory) -> tuple[MemoryRow, bool]:
    """Insert one memory; with an ``external_id`` seen before, return that row instead.

    INSERT ... ON CONFLICT DO NOTHING waits for a concurrent insert of the same id, so any
    number of simultaneous retries produce exactly one row. The new row and its embedding job
    commit together; the row is then embedded on the write (``fresh_vectors``).
    """
    [terms] = await terms_for(writes.data_dir, [fields["content"]])
    row: NewMemory = {**fields, "search_terms": terms}
    async with transaction(require_database(writes.database).pool) as cur:
        for _attempt in range(3):
            inserted = await db.insert_memories(cur, [row])
            if inserted:
                await enqueue_embedding(cur, delay_seconds=fresh_vectors.job_delay(
                    writes.config.current(), 1))
                break
            # Nothing inserted: the external_id is taken (no other clash skips a row).
            external_id = fields.get("external_id")
            existing = await db.get_by_external_id(cur, external_id) if external_id else None
            if existing is not None:
                return existing, False
        else:  # the clashing row vanished between our statements three times
            raise MemoryConflict("external_id_busy", "That external_id is being changed; retry.")
    await fresh_vectors.embed_written(writes, inserted)
    await request_describing(writes, writes.config.current())
    return inserted[0], True


async def edit_memory(writes: MemoryWrites, memory_id: int, changes: MemoryChanges
                      ) -> tuple[MemoryRow, list[str]]:
    """Apply content/importance/layer/title; new content gets new terms and loses its vector
    (the new one is made on the write, ``fresh_vectors``)."""
    terms = (await terms_for(writes.data_dir,
                             [changes["content"]]))[0] if "content" in changes else []
    async with transaction(require_database(writes.database).pool) as cur:
        row = await db.get_memory(cur, memory_id, for_update=True)
        if row is None:
            raise NotFound(f"No memory with id {memory_id}.")
        current: Mapping[str, object] = row
        updates = cast(MemoryChanges, {name: value for name, value in changes.items()
                                       if current[name] != value})
        if "content" in updates:
            # What the memory model wrote described the old text: new text, new terms.
            updates.update({"search_terms": terms, "model_keywords": [],
                            "model_questions": [], "described_at": None})
            await db.delete_embedding(cur, memory_id)
            await enqueue_embedding(cur, delay_seconds=fresh_vectors.job_delay(
                writes.config.current(), 1))
            await enqueue_describing(cur, writes.config.current())
        if updates:
            row = _present(await db.update_memory(cur, memory_id, updates), memory_id)
    if "content" in updates:
        await fresh_vectors.embed_written(writes, [row])
        writes.jobs.wake()  # the description asked for above
    return row, sorted(name for name in updates
                       if name not in {"search_terms", "model_keywords", "model_questions",
                                        "described_at"})


async def archive_memory(database: Database, memory_id: int) -> MemoryRow:
    async with transaction(database.pool) as cur:
        row = await _locked(cur, memory_id)
        if not row["is_active"]:
            raise MemoryConflict("already_archived", f"Memory {memory_id} is already archived.")
        await db.archive_memories(cur, [memory_id])
        return _present(await db.get_memory(cur, memory_id), memory_id)


async def restore_memory(database: Database, memory_id: int) -> MemoryRow:
    async with transaction(database.pool) as cur:
        row = await _locked(cur, memory_id)
        if row["is_active"]:
            raise MemoryConflict("not_archived", f"Memory {memory_id} is not archived.")
        if row["superseded_by"] is not None:
            raise MemoryConflict("superseded", f"Memory {memory_id} was replaced by a newer "
                                 "version; use undo-supersede to bring it back.")
        await db.restore_memories(cur, [memory_id])
        return _present(await db.get_memory(cur, memory_id), memory_id)


async def delete_memory(database: Database, memory_id: int) -> None:
    """Delete for good: only archived rows outside version chains and not needed for a revert."""
    async with transaction(database.pool) as cur:
        row = await _locked(cur, memory_id)
        if row["is_active"]:
            raise MemoryConflict("not_archived", f"Memory {memory_id} is active; archive it "
                                 "before deleting it permanently.")
        if await db.chain_members(cur, [memory_id]):
            raise MemoryConflict("version_chain_member", f"Memory {memory_id} belongs to a "
                                 "version chain and cannot be deleted permanently.")
        if await db.merge_sources(cur, [memory_id]):
            raise MemoryConflict("merge_source", f"Memory {memory_id} is a source of a merged "
                                 "memory that can still be reverted.")
        await db.delete_memories(cur, [memory_id])


async def promote_memory(database: Database, memory_id: int) -> MemoryRow:
    """Make an active memory core (layer 3); promoting a core memory changes nothing."""
    async with transaction(database.pool) as cur:
        row = await _locked(cur, memory_id)
        if not row["is_active"]:
            raise MemoryConflict("archived", f"Memory {memory_id} is archived; restore it first.")
        if row["layer"] == CORE_LAYER:
            return row
        return _present(await db.set_layer(cur, memory_id, CORE_LAYER), memory_id)


async def _locked(cur: Cursor, memory_id: int) -> MemoryRow:
    return _present(await db.get_memory(cur, memory_id, for_update=True), memory_id)


def _present(row: MemoryRow | None, memory_id: int) -> MemoryRow:
    """The row, or NotFound (a row locked in this transaction is always there)."""
    if row is None:
        raise NotFound(f"No memory with id {memory_id}.")
    return row


# --- version chains ------------------------------------------------------------------------

async def versions(database: Database, memory_id: int) -> list[MemoryRow]:
    """The whole chain ``memory_id`` belongs to, oldest first (just the row when unchained)."""
    async with cursor(database.pool) as cur:
        chain = await db.version_chain(cur, memory_id)
    if not chain:
        raise NotFound(f"No memory with id {memory_id}.")
    return chain


async def undo_supersede(database: Database, memory_id: int) -> UndoneSupersede:
    """Bring back the older version and archive the newer one, in one transaction.

    ``memory_id`` may name either side: the replaced row, or the row that replaced it.
    """
    async with transaction(database.pool) as cur:
        row = await _locked(cur, memory_id)
        if row["superseded_by"] is not None:
            older_id, newer_id = memory_id, row["superseded_by"]
        else:
            previous = await db.predecessor_of(cur, memory_id)
            if previous is None:
                raise MemoryConflict("not_superseded", f"Memory {memory_id} neither replaced "
                                     "nor was replaced by another memory.")
            older_id, newer_id = previous["id"], memory_id
        locked = {r["id"]: r for r in await db.lock_memories(cur, [older_id, newer_id])}
        older, newer = locked[older_id], locked[newer_id]
        if older["superseded_by"] != newer_id:
            raise MemoryConflict("chain_changed", "The version chain changed meanwhile; reload.")
        if not newer["is_active"] or newer["superseded_by"] is not None:
            raise MemoryConflict("newer_not_current", "The newer version is no longer the "
                                 "current one; undo the later change first.")
        await db.archive_memories(cur, [newer_id])
        await db.reinstate_replaced(cur, older_id)
        restored = _present(await db.get_memory(cur, older_id), older_id)
        archived = _present(await db.get_memory(cur, newer_id), newer_id)
    log.info("undid supersede: memory %s restored, %s archived", older_id, newer_id)
    return {"restored": restored, "archived": archived}


# --- batches -------------------------------------------------------------------------------

async def batch_update(database: Database, ids: list[int], fields: MemoryChanges
                       ) -> dict[str, Any]:
    async with transaction(database.pool) as cur:
        found = {row["id"] for row in await db.lock_memories(cur, ids)}
        changed = await db.update_many(cur, sorted(found), fields)
    return _batch_report("updated", ids, changed,
                         {"not_found": len(set(ids) - found),
                          "unchanged": len(found) - len(changed)})


async def batch_archive(database: Database, ids: list[int]) -> dict[str, Any]:
    async with transaction(database.pool) as cur:
        rows = await db.lock_memories(cur, ids)
        changed = await db.archive_memories(cur, [r["id"] for r in rows if r["is_active"]])
    return _batch_report("archived", ids, changed,
                         {"not_found": len(ids) - len(rows),
                          "already_archived": sum(not r["is_active"] for r in rows)})


async def batch_restore(database: Database, ids: list[int]) -> dict[str, Any]:
    async with transaction(database.pool) as cur:
        rows = await db.lock_memories(cur, ids)
        archived = [r for r in rows if not r["is_active"]]
        changed = await db.restore_memories(
            cur, [r["id"] for r in archived if r["superseded_by"] is None])
    return _batch_report("restored", ids, changed,
                         {"not_found": len(ids) - len(rows),
                          "not_archived": len(rows) - len(archived),
                          "superseded": sum(r["superseded_by"] is not None for r in archived)})


async def batch_delete(database: Database, ids: list[int]) -> dict[str, Any]:
    """Permanently delete archived rows among ``ids``, keeping chain members and merge sources."""
    async with transaction(database.pool) as cur:
        rows = await db.lock_memories(cur, ids)
        archived = [r["id"] for r in rows if not r["is_active"]]
        chained = await db.chain_members(cur, archived) if archived else set()
        sources = (await db.merge_sources(cur, archived) - chained) if archived else set()
        deleted = await db.delete_memories(
            cur, [i for i in archived if i not in chained and i not in sources])
    return _batch_report("deleted", ids, deleted,
                         {"not_found": len(ids) - len(rows),
                          "not_archived": len(rows) - len(archived),
                          "version_chain_member": len(chained), "merge_source": len(sources)})


def _batch_report(verb: str, ids: list[int], changed: list[int], skipped: dict[str, int]
                  ) -> dict[str, Any]:
    return {verb: len(changed), "processed": len(changed), "requested": len(ids),
            "ids": changed, "skipped": {k: v for k, v in skipped.items() if v}}


# --- overview and housekeeping -------------------------------------------------------------

async def list_memories(database: Database, *, active: bool, layer: int | None, limit: int,
                        offset: int) -> tuple[list[MemoryRow], int]:
    async with cursor(database.pool) as cur:
        rows = await db.list_memories(cur, active=active, layer=layer, limit=limit,
                                      offset=offset)
        total = await db.count_memories(cur, active=active, layer=layer)
    return rows, total


async def layer_stats(database: Database) -> dict[str, Any]:
    async with cursor(database.pool) as cur:
        counts = {row["layer"]: row for row in await db.layer_counts(cur)}
    none = LayerCount(layer=0, active=0, archived=0)
    layers = [{"layer": layer, "name": name,
               "active": int(counts.get(layer, none)["active"]),
               "archived": int(counts.get(layer, none)["archived"])}
              for layer, name in LAYER_NAMES.items()]
    return {"layers": layers, "active": sum(item["active"] for item in layers),
            "archived": sum(item["archived"] for item in layers)}


async def cleanup_fragments(database: Database, days: float) -> dict[str, Any]:
    """Delete archived fragments archived more than ``days`` ago, except version-chain
    members. Merge sources go too: the merged memories that list them keep their text but can
    no longer be reverted, and the receipt says how many."""
    async with transaction(database.pool) as cur:
        old = await db.archived_fragments_before(cur, days)
        chained = await db.chain_members(cur, old) if old else set()
        doomed = [i for i in old if i not in chained]
        sources = await db.merge_sources(cur, doomed) if doomed else set()
        ended = await db.end_merges_of(cur, sorted(sources)) if sources else []
        deleted = await db.delete_memories(cur, doomed)
    if deleted:
        log.info("cleanup removed %s archived fragments older than %s days (%s merge sources;"
                 " %s merges no longer revertible)", len(deleted), days, len(sources),
                 len(ended))
    return {"days": days, "deleted": len(deleted), "kept": len(chained),
            "kept_reasons": {"version_chain_member": len(chained)},
            "merge_sources_deleted": len(sources), "merges_ended": len(ended)}
