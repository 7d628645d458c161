"""Why a memory that matched a chat was not injected: the best candidates left out, each with
its reason, kept in the injected record (the try-it panel and the conversation view show it).

Reasons: ``below_floor`` (its relevance, the number the injection floor compares, is under the
floor), ``seen`` (injected into this session within ``MEMORY_SEEN_TTL_HOURS``; it would have
passed the floor), ``over_limit`` (it passed the floor but ``MAX_MEMORIES_INJECT`` were taken
before it). A search that ran on keywords only says why once for the turn (its ``fallback``,
``busy`` when the embedding model shed the query under load).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from pawwake.db.memory_search import MemoryHit
from pawwake.db.turn_injections import InjectedEntry
from pawwake.memory.search import SearchOutcome, SearchResult

NEAR_MISSES = 3  # left-out candidates kept per turn, best first

BELOW_FLOOR = "below_floor"
SEEN = "seen"
OVER_LIMIT = "over_limit"


@dataclass(frozen=True)
class NearMiss:
    result: SearchResult
    reason: str  # BELOW_FLOOR | SEEN | OVER_LIMIT


@dataclass(frozen=True)
class Recall:
    """The memories a turn injects and the best of those it left out."""

    injected: list[SearchResult]
    mode: str  # "hybrid" | "keyword" | "off"
    floor: float  # the injection floor in force (``SearchOutcome.floor``)
    near_misses: list[NearMiss]
    fallback: str | None = None  # ``SearchOutcome.fallback``

    @classmethod
    def off(cls) -> Recall:
        return cls([], "off", 0.0, [])

    def without_due_reminders(self, now: datetime) -> Recall:
        """Leave out memories whose reminder is due and not yet delivered: the reminder path
        delivers them (this request's claim, or another's), so injecting one as a memory too
        would say it twice, or before the claim that delivers it is settled."""
        kept = [r for r in self.injected if not _due_reminder(r.memory, now)]
        return self if len(kept) == len(self.injected) else replace(self, injected=kept)


def _due_reminder(memory: MemoryHit, now: datetime) -> bool:
    remind_at = memory["remind_at"]
    return (remind_at is not None and remind_at <= now
            and memory["reminder_delivered_at"] is None)


def sort_out(outcome: SearchOutcome, limit: int) -> Recall:
    """Split a search made wider than ``limit``: the ``limit`` most relevant that reach the
    floor are injected, most relevant first (the score ranks candidates; relevance says how
    surely a memory is what the chat is about, so among many near misses that pass the
    floor, the one that holds every keyword and stands out is not cut for them); the others
    that reach it (over the limit), the held-back ones that would have (seen) and those
    under it are the near misses, the most relevant first."""
    floor = outcome.floor
    passing = sorted((r for r in outcome.results if r.relevance >= floor),
                     key=lambda r: (-r.relevance, -r.score, -r.id))
    injected = passing[:limit]
    missed = [NearMiss(r, OVER_LIMIT) for r in passing[limit:]]
    missed += [NearMiss(r, BELOW_FLOOR) for r in outcome.results if r.relevance < floor]
    missed += [NearMiss(r, SEEN) for r in outcome.held_back if r.relevance >= floor]
    missed.sort(key=lambda miss: (-miss.result.relevance, -miss.result.score,
                                  -miss.result.id))
    return Recall(injected, outcome.mode, floor, missed[:NEAR_MISSES], outcome.fallback)


def record_entries(recall: Recall) -> list[InjectedEntry]:
    """The injected record's entries for this recall: the search (mode, floor, fallback), the
    injected memories, then the near misses (texts are dropped when the record is stored)."""
    if recall.mode == "off":
        return []
    entries: list[InjectedEntry] = [{"kind": "memory_search", "mode": recall.mode,
                                      "floor": round(recall.floor, 4),
                                      "fallback": recall.fallback}]
    entries += [{"kind": "memory", "id": r.id, "score": round(float(r.score), 4),
                 "relevance": round(float(r.relevance), 4), "text": r.memory["content"]}
                for r in recall.injected]
    entries += [{"kind": "near_miss", "id": miss.result.id, "reason": miss.reason,
                 "relevance": round(float(miss.result.relevance), 4),
                 "floor": round(recall.floor, 4),  # each entry read alone (a memory's page)
                 "text": miss.result.memory["content"]} for miss in recall.near_misses]
    return entries
