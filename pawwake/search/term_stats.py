"""Planning a keyword search so its cost stays bounded at any collection size.

Every row containing a rare term is a candidate ("gathered"), and such a term's document
frequency is counted exactly among them. A term so frequent that gathering all its rows would
exceed ``GATHER_BUDGET`` (only terms the statistics list can be) is only matched among the ``RECENT_WINDOW`` newest memories, and its
frequency comes from the planner's statistics (``most_common_elems``), which cost nothing to
read. The collection size and those statistics are cached for ``ttl`` seconds and then
refreshed in the background (no chat request waits for the count); collections below
``EXACT_BELOW`` rows are always gathered in full, their exact size counted by the keyword
statement itself (``exact_size``), so the cache never makes their weights stale.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

import aiopg

from pawwake.db import memory_search as search_db
from pawwake.db.pool import cursor

log = logging.getLogger(__name__)

EXACT_BELOW = 5000
GATHER_BUDGET = 1000  # most rows gathered for the frequent terms of one query (estimated)
GATHER_CAP = 5000  # a hard limit on gathered rows, should the statistics be out of date
RECENT_WINDOW = 1000  # newest memories searched for the frequent terms


@dataclass(frozen=True)
class KeywordPlan:
    collection: int  # active memories (N of the IDF formula)
    gather: list[str]  # every row containing one of these is a candidate
    windowed: list[str]  # matched only among the newest RECENT_WINDOW rows
    estimates: dict[str, int] = field(default_factory=dict)  # document frequency, windowed terms
    window: int = RECENT_WINDOW
    gather_cap: int | None = None  # None: small collection, gather everything
    exact_size: bool = False  # the statement counts the active memories itself


class TermStats:
    """One per process; see the module docstring."""

    def __init__(self, ttl: float = 30.0) -> None:
        self.ttl = ttl
        self._loaded_at = -1e9
        self._active = 0
        self._rows = 0
        self._frequent: dict[str, float] = {}
        self._reloading: asyncio.Future[None] | None = None

    async def plan(self, pool: aiopg.Pool, terms: list[str]) -> KeywordPlan:
        await self._refresh(pool)
        if self._active < EXACT_BELOW or not self._frequent:
            return KeywordPlan(self._active, list(terms), [],
                               exact_size=self._active < EXACT_BELOW)
        # Terms the statistics do not list are rare: always gathered (the SQL caps the rows in
        # case the statistics are stale). Listed terms are gathered rarest first within budget.
        listed = [t for t in terms if t in self._frequent]
        gather = [t for t in terms if t not in self._frequent]
        spent = 0.0
        for term in sorted(listed, key=lambda t: self._frequent[t]):
            rows = self._frequent[term] * self._rows  # what gathering it reads
            if spent + rows > GATHER_BUDGET:
                break
            gather.append(term)
            spent += rows
        windowed = [t for t in terms if t not in gather]
        estimates = {t: round(self._frequent[t] * self._active) for t in windowed}  # active
        return KeywordPlan(self._active, gather, windowed, estimates, gather_cap=GATHER_CAP)

    async def active(self, pool: aiopg.Pool) -> int:
        """Active memories, as last counted (at most ``ttl`` seconds old)."""
        await self._refresh(pool)
        return self._active

    async def _refresh(self, pool: aiopg.Pool) -> None:
        if self._loaded_at < 0:  # nothing known yet: this first request waits
            await self._load(pool)
        elif time.monotonic() - self._loaded_at >= self.ttl and (
                self._reloading is None or self._reloading.done()):
            self._reloading = asyncio.ensure_future(self._load(pool))
            self._reloading.add_done_callback(_log_failure)

    async def _load(self, pool: aiopg.Pool) -> None:
        async with cursor(pool) as cur:
            active, rows = await search_db.collection_size(cur)
            frequent = await search_db.frequent_terms(cur) if active >= EXACT_BELOW else {}
        self._active, self._rows, self._frequent = active, rows, frequent
        self._loaded_at = time.monotonic()


def _log_failure(task: asyncio.Future[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("keyword statistics refresh failed (the older ones stay in use): %s",
                    type(task.exception()).__name__)
