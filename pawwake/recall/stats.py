"""IDF statistics for conversation recall at a bounded cost per search.

The number of searchable messages (N) and the planner's most common terms are cached for
``ttl`` seconds. A term the statistics list as frequent gets its document frequency estimated
from its share of rows (counting it exactly would read a large part of the table on every
search); every other term is rare and counted exactly on the GIN index. Below
``EXACT_BELOW`` searchable messages everything is counted exactly on each search (cheap, and
exact figures keep small collections predictable).

Matching is bounded the same way: a listed term whose messages would exceed
``GATHER_BUDGET`` rows is only matched among the ``RECENT_WINDOW`` newest messages, and
gathered rows are capped at ``GATHER_CAP`` should the statistics be stale. Same approach and
limits as memory search's ``pawwake.search.term_stats``.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Sequence
from typing import Any

import aiopg

from pawwake.db import fragments as db
from pawwake.db import memory_search
from pawwake.db.pool import cursor
from pawwake.search.term_stats import GATHER_BUDGET, GATHER_CAP, RECENT_WINDOW

EXACT_BELOW = 5000


class RecallTermStats:
    """One per database pool; see the module docstring."""

    def __init__(self, ttl: float = 30.0) -> None:
        self.ttl = ttl
        self._loaded_at = -1e9
        self._searchable = 0
        self._rows = 0
        self.sessions = 0  # sessions holding a searchable message (after ``refresh``)
        self._frequent: dict[str, float] = {}

    async def refresh(self, pool: aiopg.Pool) -> None:
        if time.monotonic() - self._loaded_at < self.ttl and self._searchable >= EXACT_BELOW:
            return
        async with cursor(pool) as cur:
            self._searchable, self.sessions, self._rows = await db.searchable_totals(cur)
            self._frequent = (await memory_search.frequent_terms(cur, "conversations")
                              if self._searchable >= EXACT_BELOW else {})
        self._loaded_at = time.monotonic()

    def windowed(self, terms: Sequence[str]) -> list[str]:
        """The terms too frequent to gather every message of (after ``refresh``): listed
        ones, rarest first, are gathered while the estimated rows fit ``GATHER_BUDGET``."""
        spent, windowed = 0.0, []
        for term in sorted((t for t in terms if t in self._frequent),
                           key=lambda t: self._frequent[t]):
            rows = self._frequent[term] * self._rows
            if spent + rows > GATHER_BUDGET:
                windowed.append(term)
            else:
                spent += rows
        return windowed

    def match_options(self, terms: Sequence[str]) -> dict[str, Any]:
        """Keyword arguments of ``db.keyword_matches`` that bound its cost (after
        ``refresh``); small collections are matched in full."""
        if self._searchable < EXACT_BELOW:
            return {}
        return {"windowed": self.windowed(terms), "window": RECENT_WINDOW,
                "gather_cap": GATHER_CAP}

    async def frequencies(self, pool: aiopg.Pool, terms: Sequence[str]
                          ) -> tuple[int, dict[str, int]]:
        """(searchable messages, messages containing each term), as ``db.term_frequencies``
        returns them for small collections."""
        await self.refresh(pool)
        estimated = {t: round(self._frequent[t] * self._searchable)
                     for t in terms if t in self._frequent}
        async with cursor(pool) as cur:
            counted = await db.term_counts(cur, [t for t in terms if t not in estimated])
        return self._searchable, {**counted, **estimated}


_BY_POOL: weakref.WeakKeyDictionary[aiopg.Pool, RecallTermStats] = weakref.WeakKeyDictionary()


def for_pool(pool: aiopg.Pool) -> RecallTermStats:
    """The statistics cache of this pool's database (created on first use)."""
    stats = _BY_POOL.get(pool)
    if stats is None:
        stats = _BY_POOL[pool] = RecallTermStats()
    return stats
