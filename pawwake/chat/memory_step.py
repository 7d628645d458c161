"""The memories chat step: due reminders first, then the memories that match the turn.

Plain mode adds the block to the system text; partition mode to the current user turn, after
every cache breakpoint. Seen marks (partition mode) and reminder deliveries are written only
after the reply succeeded; a failed or cancelled reply releases the reminder claims.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import aiopg

from pawwake.chat.prepared import (
    NOTHING,
    ReplyHook,
    StepContext,
    StepInput,
    StepResult,
)
from pawwake.db import memory_seen, reminders
from pawwake.db.pool import DATABASE_ERRORS, cursor
from pawwake.db.turn_injections import InjectedEntry
from pawwake.llm.sse import CapturedReply
from pawwake.memory.faces import MemorySearch
from pawwake.memory.inject import (
    claim_due,
    memory_block,
    plain_system_text,
    recall_with_reasons,
    renew_claims,
)
from pawwake.memory.near_misses import record_entries
from pawwake.memory.search import SearchResult, touch_results
from pawwake.tasks import BackgroundTasks
from pawwake.text.rounds import last_user_text

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MemoryStepParts:
    """What the memories step works with: memory search, and the background tasks that keep
    a reminder claim alive while the reply streams."""

    search: MemorySearch
    tasks: BackgroundTasks


async def memories(parts: MemoryStepParts, context: StepContext, request: StepInput
                   ) -> StepResult:
    """Claim due reminders and search memories side by side (both are on the
    time-to-first-token path); inject both as one ``<retrieved_memories>`` block."""
    search, tasks = parts.search, parts.tasks
    settings = context.settings
    database = context.database
    if database is None or not settings.MEMORY_ENABLED:
        return NOTHING
    partition = bool(settings.CACHE_PARTITION_ENABLED)
    pool = database.pool
    token = uuid.uuid4().hex
    started = time.perf_counter()
    timings: dict[str, float] = {}
    # The search goes first: its query embedding starts before the claim's statement is sent.
    found, due = await asyncio.gather(
        recall_with_reasons(search, settings, request.session_id,
                            last_user_text(list(request.turn_messages)),
                            partition=partition, touch=False, timings=timings),
        claim_due(pool, token),
        return_exceptions=True)
    searched = time.perf_counter()
    if isinstance(due, BaseException) or isinstance(found, BaseException):
        failure = due if isinstance(due, BaseException) else found
        assert isinstance(failure, BaseException)
        if isinstance(due, list) and due:
            with contextlib.suppress(*DATABASE_ERRORS):
                async with cursor(pool) as cur:
                    await reminders.release_claims(cur, token)
        if partition or not isinstance(failure, DATABASE_ERRORS):
            raise failure
        log.warning("memory recall skipped: %s", type(failure).__name__)
        return NOTHING
    found = found.without_due_reminders(datetime.now(UTC))
    results = found.injected
    explained = record_entries(found)  # the search, what it injects and the near misses
    hooks: list[ReplyHook] = []
    if due:
        hooks.append(held_reminders(tasks, pool, token))
    if not results and not due:
        _log_steps(timings, started, searched)
        return StepResult(injected=tuple(explained), hooks=tuple(hooks))
    if results:
        hooks.append(touched(search, results))
    if partition and results:
        hooks.append(seen_memories(pool, request.session_id, [r.id for r in results]))
    block = memory_block([r.memory for r in results], due, settings)
    injected: list[InjectedEntry] = [
        {"kind": "reminder", "id": r["id"], "remind_at": r["remind_at"].isoformat(),
         "text": r["content"]} for r in due]
    injected += explained
    _log_steps(timings, started, searched)
    placed = plain_system_text(block, bool(due)) if not partition else block
    return StepResult(system_parts=() if partition else (placed,),
                      turn_blocks=(placed,) if partition else (),
                      injected=tuple(injected), hooks=tuple(hooks),
                      memory_count=len(results) + len(due))


def held_reminders(tasks: BackgroundTasks, pool: aiopg.Pool, token: str) -> ReplyHook:
    """Keep the claim alive during a long stream; deliver on success (before the turn is
    stored, so the next request never sees the reminder again), release otherwise."""
    renewal = tasks.spawn(renew_claims(pool, token), name="reminder-claim-renewal")

    async def delivered(_reply: CapturedReply) -> None:
        renewal.cancel()
        async with cursor(pool) as cur:
            await reminders.mark_delivered(cur, token)

    async def released(_reason: str) -> None:
        renewal.cancel()
        async with cursor(pool) as cur:
            await reminders.release_claims(cur, token)

    return ReplyHook("deliver reminders", on_success=delivered, on_failure=released,
                     before_store=True)


def touched(search: MemorySearch, results: Sequence[SearchResult]) -> ReplyHook:
    """Injected memories count as used (their last-used time) once the reply succeeded."""

    async def touch(_reply: CapturedReply) -> None:
        await touch_results(search, results)

    return ReplyHook("touch injected memories", on_success=touch)


def seen_memories(pool: aiopg.Pool, session_id: str, ids: list[int]) -> ReplyHook:
    """Partition mode: memories injected into the thread give way to others for a while."""

    async def mark_seen(_reply: CapturedReply) -> None:
        async with cursor(pool) as cur:
            await memory_seen.mark_seen(cur, session_id, ids)

    return ReplyHook("mark memories seen", on_success=mark_seen)


def _log_steps(timings: dict[str, float], started: float, searched: float) -> None:
    """The memory step's time per part, at DEBUG (search steps, then the injection)."""
    if log.isEnabledFor(logging.DEBUG):
        now = time.perf_counter()
        timings["injection"] = (now - searched) * 1000.0
        timings["total"] = (now - started) * 1000.0
        log.debug("memory step (ms): %s",
                  " ".join(f"{name}={value:.1f}" for name, value in timings.items()))
