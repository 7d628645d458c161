"""Adopting a Pawwake 4.x database in place, after ``migrate`` moved its tables aside.

The copy into our tables runs in steps, each made of transactions of at most ``BATCH`` source
rows that also record how far the step has come (``legacy_adoption_steps``). Killed at any
moment, the last transaction simply did not happen: the next start goes on from the last
committed batch. A finished step is never run again, and a finished adoption makes this a
no-op. Every transaction takes the migration lock, so two processes starting together
adopt once.

The settings in force decide two things: which saved 4.x settings are carried over
(``settings_map``) and whether the 4.x vectors are kept (the API provider with the very
model and dimension that made them) or left to the background embedding jobs.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

import aiopg

from pawwake.db import gateway_config as config_db
from pawwake.db import jobs as jobs_db
from pawwake.db import memory_embeddings as vectors_db
from pawwake.db.legacy import conversations, helpers, memories, progress, threads, vectors
from pawwake.db.legacy.schema import LegacySchema, aside_schema
from pawwake.db.migrate import LOCK_KEY
from pawwake.db.pool import Cursor, transaction
from pawwake.llm.embeddings import Provenance
from pawwake.memory.embedding_jobs import EMBED_KIND as MEMORY_EMBED_KIND
from pawwake.memory.embedding_jobs import enqueue_embedding as enqueue_memory_embedding
from pawwake.memory.reindex import KIND as REINDEX_KIND
from pawwake.recall.index import EMBED_KIND as MESSAGE_EMBED_KIND
from pawwake.recall.index import enqueue_embedding as enqueue_message_embedding
from pawwake.settings import Settings
from pawwake.upgrade.survey import Plan, make_plan, summary_lines, survey

log = logging.getLogger(__name__)

BATCH = 5000  # source rows per transaction: about a second of work on a small server

Batched = Callable[[Cursor, int, int], Awaitable[tuple[int | None, int]]]


@dataclass(frozen=True)
class Run:
    legacy: LegacySchema
    plan: Plan


async def finish_adoption(pool: aiopg.Pool, base: Settings) -> dict[str, Any] | None:
    """Finish a recorded, unfinished adoption; its counts, or None when there was none."""
    async with transaction(pool) as cur:
        await helpers.prepare(cur)
        state = await progress.load(cur)
        legacy = await aside_schema(cur)
        if state is None or state.finished_at is not None or legacy is None:
            return None
        plan = await make_plan(cur, legacy, base)
        if not state.survey:
            await progress.save_survey(cur, await survey(cur, legacy, plan))
    run = Run(legacy, plan)
    log.info("adopting the Pawwake %s database (old tables kept in %s)", legacy.version,
             legacy.schema)
    for name, batched in _batched_steps(run):
        await _run_batched(pool, name, batched, BATCH)
    for name, once in _single_steps(run):
        await _run_once(pool, name, once)
    async with transaction(pool) as cur:
        await helpers.prepare(cur)
        await cur.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
        await progress.finish(cur)
        final = await progress.load(cur)
    assert final is not None
    counts = {name: step.counts for name, step in final.steps.items()}
    for line in summary_lines(final.version, counts, final.survey):
        log.info("%s", line)
    return counts


def _batched_steps(run: Run) -> list[tuple[str, Batched]]:
    legacy, keep = run.legacy, run.plan.keep_vectors
    steps: list[tuple[str, Batched]] = []
    if legacy.has("memories"):
        steps.append(("memories", lambda cur, after, n: memories.copy_batch(
            cur, legacy, after, n)))
    if legacy.has("conversations"):
        steps.append(("conversations", lambda cur, after, n: conversations.copy_batch(
            cur, legacy, after, n)))
    if legacy.has("token_usage"):
        steps.append(("usage", lambda cur, after, n: conversations.copy_usage(
            cur, legacy, after, n)))
    if keep is not None:
        for table in ("memories", "conversations"):
            if legacy.vector_column(table) is not None:
                steps.append((f"{table}_vectors", _vector_step(legacy, table, keep)))
    return steps


def _vector_step(legacy: LegacySchema, table: str, keep: dict[str, Any]) -> Batched:
    return lambda cur, after, n: vectors.copy_batch(cur, legacy, table, keep, after, n)


def _single_steps(run: Run) -> list[tuple[str, Callable[[Cursor], Awaitable[dict[str, Any]]]]]:
    legacy, plan = run.legacy, run.plan

    async def settings_step(cur: Cursor) -> dict[str, Any]:
        await config_db.save_overrides(cur, plan.settings.carried)
        return {**plan.settings.outcomes(), "stored": sorted(plan.settings.carried)}

    async def chains_step(cur: Cursor) -> dict[str, Any]:
        return await memories.link_chains(cur, legacy)

    async def threads_step(cur: Cursor) -> dict[str, Any]:
        counts = await threads.copy_threads(cur, legacy, plan.in_force.CACHE_PARTITION_X)
        return {**counts, **await threads.copy_seen_marks(cur, legacy)}

    async def finishing_step(cur: Cursor) -> dict[str, Any]:
        return await _finishing(cur, plan)

    return [("settings", settings_step), ("chains", chains_step), ("threads", threads_step),
            ("finishing", finishing_step)]


async def _finishing(cur: Cursor, plan: Plan) -> dict[str, Any]:
    """Ids continue after the adopted ones; the keyword index and the missing vectors are
    made by the background jobs (they resume by themselves after a restart)."""
    for table in ("memories", "conversations"):
        await cur.execute(
            f"SELECT setval(pg_get_serial_sequence('{table}', 'id'),"
            f" greatest((SELECT max(id) FROM {table}), 1))")
    if plan.keep_vectors is not None:
        await vectors_db.record_provenance(cur, Provenance(**plan.keep_vectors))
    jobs = [REINDEX_KIND, MEMORY_EMBED_KIND]
    await jobs_db.enqueue(cur, REINDEX_KIND, {"rules": "adopted"}, dedupe_key="adopted")
    await enqueue_memory_embedding(cur)
    if plan.in_force.CONVERSATION_RECALL_ENABLED:
        await enqueue_message_embedding(cur)
        jobs.append(MESSAGE_EMBED_KIND)
    return {"jobs": jobs}


async def _run_batched(pool: aiopg.Pool, name: str, batched: Batched, batch: int) -> None:
    while True:
        async with transaction(pool) as cur:
            step = await _locked_step(cur, name)
            if step.done:
                return
            last, inserted = await batched(cur, step.position, batch)
            counts = {**step.counts, "adopted": int(step.counts.get("adopted", 0)) + inserted}
            await progress.save_step(cur, replace(
                step, position=step.position if last is None else int(last), counts=counts,
                done=last is None))
        if last is None:
            log.info("adopted %s: %s", name, counts.get("adopted", 0))
            return


async def _run_once(pool: aiopg.Pool, name: str,
                    once: Callable[[Cursor], Awaitable[dict[str, Any]]]) -> None:
    async with transaction(pool) as cur:
        step = await _locked_step(cur, name)
        if step.done:
            return
        counts = await once(cur)
        await progress.save_step(cur, replace(step, counts=counts, done=True))


async def _locked_step(cur: Cursor, name: str) -> progress.Step:
    await helpers.prepare(cur)
    await cur.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
    return await progress.lock_step(cur, name)
