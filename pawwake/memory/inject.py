"""Recalling memories into a chat request: due reminders first, then the best matches.

Plain mode appends the block to the system prompt; partition mode puts it in the current user
turn, after every cache breakpoint. Seen marks (partition mode) and reminder deliveries are
written only after the reply succeeded; a failed or cancelled reply releases the claims.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import date, datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

import psycopg2
from aiohttp import web

from pawwake.chat.rounds import last_user_text
from pawwake.db import memory_seen, reminders
from pawwake.db.errors import DatabaseUnavailable
from pawwake.db.pool import cursor
from pawwake.memory.search import SearchResult, search_memories, touch_results
from pawwake.services import services_of

if TYPE_CHECKING:
    from pawwake.services import Services

log = logging.getLogger(__name__)

REMINDERS_PER_REQUEST = 5
RENEW_EVERY_SECONDS = 60.0
RENEW_FOR_AT_MOST_SECONDS = 4 * 3600.0

PLAIN_GUIDANCE = (
    "以下是你对用户的长期记忆（按相关度排列，方括号内是日期）。自然地运用它们，像老朋友一样记得这些事；"
    "记忆之间有冲突时以较新的为准；不要说“根据我的记忆/记录”之类的话，也不要逐条复述。\n"
    "These are your long-term memories of the user (most relevant first, dates in brackets). "
    "Use them naturally, prefer the newer one when two disagree, and never say \"according "
    "to my records\".")
REMINDER_GUIDANCE = ("其中标有“提醒”的是用户要求你在此时提醒的事，请在回复中自然地提起。"
                     " Items marked 提醒 are reminders the user asked for: bring them up now.")


def local_zone(settings: Any) -> timezone:
    return timezone(timedelta(hours=settings.TIMEZONE_HOURS))


def memory_line(memory: dict[str, Any], zone: timezone) -> str:
    """``[2026-02-17] content``: the event's date when known, else the local creation date."""
    when = memory.get("event_date")
    if not isinstance(when, date):
        created = memory.get("created_at")
        when = created.astimezone(zone).date() if isinstance(created, datetime) else None
    prefix = f"[{when.isoformat()}] " if when else ""
    return prefix + " ".join(str(memory["content"]).split())


def reminder_line(reminder: Mapping[str, Any], zone: timezone) -> str:
    moment = reminder["remind_at"].astimezone(zone).strftime("%Y-%m-%d %H:%M")
    return f"[提醒 {moment}] " + " ".join(str(reminder["content"]).split())


def memory_block(memories: list[dict[str, Any]], due: Sequence[Mapping[str, Any]], settings: Any
                 ) -> str:
    """The ``<retrieved_memories>`` block: reminders first, then memories."""
    zone = local_zone(settings)
    lines = [reminder_line(r, zone) for r in due] + [memory_line(m, zone) for m in memories]
    return "<retrieved_memories>\n" + "\n".join(lines) + "\n</retrieved_memories>"


def plain_system_text(block: str, has_reminders: bool) -> str:
    guidance = PLAIN_GUIDANCE + ("\n" + REMINDER_GUIDANCE if has_reminders else "")
    return f"{guidance}\n{block}"


async def recall_for_request(services: Services, settings: Any, session_id: str,
                             query: str, *, partition: bool, touch: bool = True,
                             timings: dict[str, float] | None = None
                             ) -> tuple[list[SearchResult], str]:
    """Search memories for this turn; in partition mode skip ones the session saw recently
    (excluded before the limit, so the next candidates move up). In hybrid mode only results
    whose relevance reaches ``MEMORY_INJECT_MIN_RELEVANCE`` are injected: the semantic side
    always has nearest neighbours, so without it an unrelated message would bring in noise."""
    database = services.require_database()
    limit = settings.MAX_MEMORIES_INJECT
    if limit <= 0 or not query.strip():
        return [], "off"
    exclude: list[int] = []
    if partition:
        async with cursor(database.pool) as cur:
            exclude = await memory_seen.recently_seen(cur, session_id,
                                                      settings.MEMORY_SEEN_TTL_HOURS)
    outcome = await search_memories(services, query, limit=limit, exclude_ids=exclude,
                                    settings=settings, touch=touch)
    if timings is not None:
        timings.update(outcome.timings)
    if outcome.mode != "hybrid":  # keywords alone admit only rows sharing a query word
        return outcome.results, outcome.mode
    floor = float(settings.MEMORY_INJECT_MIN_RELEVANCE)
    return [r for r in outcome.results if r.relevance >= floor], outcome.mode


Step = Callable[[Any, Any], Awaitable[None]]
_RECALL_ERRORS = (psycopg2.Error, OSError, DatabaseUnavailable)


def memory_step(app: web.Application) -> Step:
    """The chat step that injects reminders and memories (registered on the chat pipeline)."""

    async def inject(context: Any, prepared: Any) -> None:
        settings = context.settings
        database = context.database
        if database is None or not settings.MEMORY_ENABLED:
            return
        partition = bool(settings.CACHE_PARTITION_ENABLED)
        pool = database.pool
        token = uuid.uuid4().hex
        started = time.perf_counter()
        timings: dict[str, float] = {}
        # Both are on the time-to-first-token path: run them side by side.
        due, found = await asyncio.gather(
            _claim_due(pool, token),
            recall_for_request(services_of(app), settings, prepared.session_id,
                               last_user_text(prepared.client_messages),
                               partition=partition, touch=False, timings=timings),
            return_exceptions=True)
        searched = time.perf_counter()
        failure = next((r for r in (due, found) if isinstance(r, BaseException)), None)
        if failure is not None:
            if isinstance(due, list) and due:
                with contextlib.suppress(psycopg2.Error, OSError, DatabaseUnavailable):
                    async with cursor(pool) as cur:
                        await reminders.release_claims(cur, token)
            if partition or not isinstance(failure, _RECALL_ERRORS):
                raise failure
            log.warning("memory recall skipped: %s", type(failure).__name__)
            return
        assert isinstance(due, list) and isinstance(found, tuple)
        results = found[0]
        memories = [r.memory for r in results]
        prepared.memory_count = len(memories)
        if due:
            _hold_reminders(services_of(app), prepared, pool, token)
        if not memories and not due:
            _log_steps(timings, started, searched)
            return
        if results:

            async def touch(_prepared: Any, _reply: Any) -> None:
                await touch_results(services_of(app), results)

            prepared.after_success.append(touch)
        prepared.injected.extend(
            {"kind": "reminder", "id": int(r["id"]), "remind_at": r["remind_at"].isoformat(),
             "text": str(r["content"])} for r in due)
        prepared.injected.extend(
            {"kind": "memory", "id": r.id, "score": round(float(r.score), 4),
             "text": str(r.memory["content"])} for r in results)
        block = memory_block(memories, due, settings)
        if partition:
            prepared.turn_blocks.append(block)
        else:
            prepared.system_parts.append(plain_system_text(block, bool(due)))
        if partition and memories:
            ids = [m["id"] for m in memories]

            async def mark_seen(_prepared: Any, _reply: Any) -> None:
                async with cursor(pool) as cur:
                    await memory_seen.mark_seen(cur, prepared.session_id, ids)

            prepared.after_success.append(mark_seen)
        _log_steps(timings, started, searched)

    return inject


def _log_steps(timings: dict[str, float], started: float, searched: float) -> None:
    """The memory step's time per part, at DEBUG (search steps, then the injection)."""
    if log.isEnabledFor(logging.DEBUG):
        now = time.perf_counter()
        timings["injection"] = (now - searched) * 1000.0
        timings["total"] = (now - started) * 1000.0
        log.debug("memory step (ms): %s",
                  " ".join(f"{name}={value:.1f}" for name, value in timings.items()))


def _hold_reminders(services: Services, prepared: Any, pool: Any, token: str) -> None:
    """Keep the claim alive during a long stream; deliver on success, release otherwise."""
    renewal = services.tasks.spawn(_renew(pool, token), name="reminder-claim-renewal")

    async def delivered(_prepared: Any, _reply: Any) -> None:
        renewal.cancel()
        async with cursor(pool) as cur:
            await reminders.mark_delivered(cur, token)

    async def released(_prepared: Any, _reason: str) -> None:
        renewal.cancel()
        async with cursor(pool) as cur:
            await reminders.release_claims(cur, token)

    prepared.after_success.insert(0, delivered)
    prepared.after_failure.insert(0, released)


async def _claim_due(pool: Any, token: str) -> list[reminders.DueReminder]:
    async with cursor(pool) as cur:
        return await reminders.claim_due(cur, token, REMINDERS_PER_REQUEST)


async def _renew(pool: Any, token: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + RENEW_FOR_AT_MOST_SECONDS
    while loop.time() < deadline:
        await asyncio.sleep(RENEW_EVERY_SECONDS)
        with contextlib.suppress(psycopg2.Error, OSError):
            async with cursor(pool) as cur:
                renewed = await reminders.renew_claims(cur, token)
            if renewed == 0:
                return
