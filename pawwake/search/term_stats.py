"""Keyword statistics of a searchable collection, and a keyword search planned on them so its
cost stays bounded at any collection size.

One class serves both collections (``MEMORIES``, ``CONVERSATIONS``); the assembly builds one
``TermStats`` per collection and hands it to the feature that searches it.

Every row containing a rare term is a candidate ("gathered"), and such a term's document
frequency is counted exactly among them. A term so frequent that gathering all its rows would
exceed ``GATHER_BUDGET`` (only terms the statistics list can be) is only matched among the
``RECENT_WINDOW`` newest rows, and its frequency comes from the planner's statistics
(``most_common_elems``), which cost nothing to read. The collection's size and those
statistics are cached for ``ttl`` seconds and then refreshed in the background (no search
waits for the count). Collections below ``EXACT_BELOW`` rows are always gathered in full and
weighed by their exact size: memory's keyword statement counts it itself (``exact_size``);
conversation recall weighs its terms apart from the statement, so a small collection of
messages is counted again on every search (``Collection.recount_small``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import aiopg

from pawwake.db import fragments as fragments_db
from pawwake.db import memory_search as search_db
from pawwake.db.pool import Cursor, cursor

log = logging.getLogger(__name__)

EXACT_BELOW = 5000
GATHER_BUDGET = 1000  # most rows gathered for the frequent terms of one query (estimated)
GATHER_CAP = 5000  # a hard limit on gathered rows, should the statistics be out of date
RECENT_WINDOW = 1000  # newest rows searched for the frequent terms


class Counts(NamedTuple):
    size: int  # searchable rows (N of the IDF formula)
    rows: int  # all rows as the planner last estimated them (what its shares are of)
    sessions: int = 0  # sessions holding a searchable message (conversations only)


@dataclass(frozen=True)
class Collection:
    """A collection the statistics are kept for: how it is counted, and the table whose
    planner statistics list its frequent terms."""

    table: str
    count: Callable[[Cursor], Awaitable[Counts]]
    recount_small: bool = False  # below EXACT_BELOW, counted again on every search


async def _memory_counts(cur: Cursor) -> Counts:
    active, rows = await search_db.collection_size(cur)
    return Counts(active, rows)


async def _message_counts(cur: Cursor) -> Counts:
    searchable, sessions, rows = await fragments_db.searchable_totals(cur)
    return Counts(searchable, rows, sessions)


MEMORIES = Collection("memories", _memory_counts)
CONVERSATIONS = Collection("conversations", _message_counts, recount_small=True)


@dataclass(frozen=True)
class KeywordPlan:
    collection: int  # searchable rows (N of the IDF formula)
    gather: list[str]  # every row containing one of these is a candidate
    windowed: list[str]  # matched only among the newest RECENT_WINDOW rows
    estimates: dict[str, int] = field(default_factory=dict)  # document frequency, windowed terms
    window: int = RECENT_WINDOW
    gather_cap: int | None = None  # None: small collection, gather everything
    exact_size: bool = False  # small: the statement may count the searchable rows itself
    sessions: int = 0  # sessions holding a searchable message (conversations only)


class TermStats:
    """The keyword statistics of one collection, one per process; see the module docstring."""

    def __init__(self, collection: Collection = MEMORIES, ttl: float = 30.0) -> None:
        self.collection = collection
        self.ttl = ttl
        self._loaded_at = -1e9
        self._counts = Counts(0, 0)
        self._frequent: dict[str, float] = {}
        self._reloading: asyncio.Future[None] | None = None

    async def plan(self, pool: aiopg.Pool, terms: Sequence[str]) -> KeywordPlan:
        await self._refresh(pool)
        size = self._counts.size
        if size < EXACT_BELOW:
            return KeywordPlan(size, list(terms), [], exact_size=True,
                               sessions=self._counts.sessions)
        # Terms the statistics do not list are rare: always gathered (the SQL caps the rows in
        # case the statistics are stale). Listed terms are gathered rarest first within budget.
        listed = [t for t in terms if t in self._frequent]
        gather = [t for t in terms if t not in self._frequent]
        spent = 0.0
        for term in sorted(listed, key=lambda t: self._frequent[t]):
            rows = self._frequent[term] * self._counts.rows  # what gathering it reads
            if spent + rows > GATHER_BUDGET:
                break
            gather.append(term)
            spent += rows
        windowed = [t for t in terms if t not in gather]
        return KeywordPlan(size, gather, windowed, self.estimated(windowed), RECENT_WINDOW,
                           gather_cap=GATHER_CAP, sessions=self._counts.sessions)

    def counted_by_caller(self) -> bool:
        """Whether ``plan`` would count the collection again now (a small collection that is
        ``recount_small``, already counted once): the caller may count it in its own
        statement instead and plan with ``plan_counted``, one round trip fewer."""
        return (self._loaded_at >= 0 and self.collection.recount_small
                and self._counts.size < EXACT_BELOW)

    def plan_counted(self, terms: Sequence[str], counts: Counts) -> KeywordPlan | None:
        """``plan`` on ``counts`` the caller read (kept as the collection's counts); None when
        they show the collection is no longer small (``plan`` must then run)."""
        self._counts, self._loaded_at = counts, time.monotonic()
        if counts.size >= EXACT_BELOW:
            self._loaded_at = -1e9  # the frequent terms are to be read: plan() loads them
            return None
        return KeywordPlan(counts.size, list(terms), [], exact_size=True,
                           sessions=counts.sessions)

    async def counts(self, pool: aiopg.Pool) -> Counts:
        """The collection's counts, as last read (at most ``ttl`` seconds old; exact for a
        small collection that is ``recount_small``)."""
        await self._refresh(pool)
        return self._counts

    def estimated(self, terms: Sequence[str]) -> dict[str, int]:
        """Document frequencies of the ``terms`` the statistics list, estimated from their
        share of rows (after ``plan`` or ``counts``; nothing is listed for a small
        collection)."""
        return {t: round(self._frequent[t] * self._counts.size)
                for t in terms if t in self._frequent}

    async def _refresh(self, pool: aiopg.Pool) -> None:
        if self._loaded_at < 0 or (self.collection.recount_small
                                   and self._counts.size < EXACT_BELOW):
            await self._load(pool)  # nothing known yet, or exact figures wanted: wait
        elif time.monotonic() - self._loaded_at >= self.ttl and (
                self._reloading is None or self._reloading.done()):
            self._reloading = asyncio.ensure_future(self._load(pool))
            self._reloading.add_done_callback(_log_failure)

    async def _load(self, pool: aiopg.Pool) -> None:
        async with cursor(pool) as cur:
            counts = await self.collection.count(cur)
            frequent = (await search_db.frequent_terms(cur, self.collection.table)
                        if counts.size >= EXACT_BELOW else {})
        self._counts, self._frequent = counts, frequent
        self._loaded_at = time.monotonic()


def _log_failure(task: asyncio.Future[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("keyword statistics refresh failed (the older ones stay in use): %s",
                    type(task.exception()).__name__)
