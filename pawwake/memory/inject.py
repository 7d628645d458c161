"""Recalling memories for a chat request: the search, the block's text and the reminder claim.

The chat step that uses them is ``chat/memory_step.py``: plain mode appends the block to the
system prompt; partition mode puts it in the current user turn, after every cache breakpoint.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from datetime import timezone
from typing import TYPE_CHECKING, Any

from pawwake.database import require_database
from pawwake.db import memory_seen, reminders
from pawwake.db.memory_search import MemoryHit
from pawwake.db.pool import DATABASE_ERRORS, cursor
from pawwake.local_time import zone_of
from pawwake.memory.near_misses import Recall, sort_out
from pawwake.memory.search import SearchResult, search_memories, touch_results
from pawwake.search import fusion, relevance
from pawwake.settings import Settings
from pawwake.text.query import users_words

if TYPE_CHECKING:
    from pawwake.memory.faces import MemorySearch

log = logging.getLogger(__name__)

REMINDERS_PER_REQUEST = 5
CANDIDATES = 50  # results the floor looks at before the injection limit
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


def memory_line(memory: MemoryHit, zone: timezone) -> str:
    """``[2026-02-17] content``: the event's date when known, else the local creation date."""
    when = memory["event_date"] or memory["created_at"].astimezone(zone).date()
    return f"[{when.isoformat()}] " + " ".join(memory["content"].split())


def reminder_line(reminder: reminders.DueReminder, zone: timezone) -> str:
    moment = reminder["remind_at"].astimezone(zone).strftime("%Y-%m-%d %H:%M")
    return f"[提醒 {moment}] " + " ".join(str(reminder["content"]).split())


def memory_block(memories: Sequence[MemoryHit], due: Sequence[reminders.DueReminder],
                 settings: Settings) -> str:
    """The ``<retrieved_memories>`` block: reminders first, then memories."""
    zone = zone_of(settings)
    lines = [reminder_line(r, zone) for r in due] + [memory_line(m, zone) for m in memories]
    return "<retrieved_memories>\n" + "\n".join(lines) + "\n</retrieved_memories>"


def plain_system_text(block: str, has_reminders: bool) -> str:
    guidance = PLAIN_GUIDANCE + ("\n" + REMINDER_GUIDANCE if has_reminders else "")
    return f"{guidance}\n{block}"


async def recall_for_request(search: MemorySearch, settings: Settings, session_id: str,
                             query: str, *, partition: bool, touch: bool = True,
                             timings: dict[str, float] | None = None,
                             fusing: fusion.Fusion = fusion.CALIBRATED,
                             judging: relevance.Relevance = relevance.CALIBRATED
                             ) -> tuple[list[SearchResult], str]:
    """The memories to inject for this turn and the search mode (``recall_with_reasons``
    without the near misses)."""
    recall = await recall_with_reasons(search, settings, session_id, query,
                                       partition=partition, touch=touch, timings=timings,
                                       fusing=fusing, judging=judging)
    return recall.injected, recall.mode


async def recall_with_reasons(search: MemorySearch, settings: Settings, session_id: str,
                              query: str, *, partition: bool, touch: bool = True,
                              timings: dict[str, float] | None = None,
                              fusing: fusion.Fusion = fusion.CALIBRATED,
                              judging: relevance.Relevance = relevance.CALIBRATED) -> Recall:
    """Search memories for this turn; in partition mode skip ones the session saw recently
    (excluded before the limit, so the next candidates move up; scored aside, so they can be
    named as near misses). Only results whose relevance reaches the floor
    (``MEMORY_INJECT_MIN_RELEVANCE``, ``SearchOutcome.floor``) are injected, in hybrid and
    keyword-only mode alike (``search.relevance`` gives both one scale). The best candidates
    left out come with their reasons (``near_misses``)."""
    database = require_database(search.database)
    limit = settings.MAX_MEMORIES_INJECT
    query = users_words(query)
    if limit <= 0 or not query.strip():
        return Recall.off()
    seen: list[int] = []
    if partition:
        async with cursor(database.pool) as cur:
            seen = await memory_seen.recently_seen(cur, session_id,
                                                   settings.MEMORY_SEEN_TTL_HOURS)
    # Searched wider than the limit: a memory relevant enough can rank below others that are
    # not (a Chinese question's English memory, found through the lexicon, ranks low).
    outcome = await search_memories(search, query, limit=max(limit, CANDIDATES),
                                    held_back=seen, settings=settings, touch=False,
                                    fusing=fusing, judging=judging)
    if timings is not None:
        timings.update(outcome.timings)
    recall = sort_out(outcome, limit)
    if touch:
        await touch_results(search, recall.injected)
    return recall


async def claim_due(pool: Any, token: str) -> list[reminders.DueReminder]:
    """Claim the reminders due now (at most REMINDERS_PER_REQUEST) under ``token``."""
    async with cursor(pool) as cur:
        return await reminders.claim_due(cur, token, REMINDERS_PER_REQUEST)


async def renew_claims(pool: Any, token: str) -> None:
    """Keep a reminder claim alive during a long stream (at most RENEW_FOR_AT_MOST_SECONDS)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + RENEW_FOR_AT_MOST_SECONDS
    while loop.time() < deadline:
        await asyncio.sleep(RENEW_EVERY_SECONDS)
        with contextlib.suppress(*DATABASE_ERRORS):
            async with cursor(pool) as cur:
                renewed = await reminders.renew_claims(cur, token)
            if renewed == 0:
                return
