"""What a memory search returns: each result with its parts and relevance, the outcome with
the mode really used, and why a search ran on keywords only."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from pawwake.db.memory_search import MemoryHit
from pawwake.search.relevance import Evidence


@dataclass
class SearchResult:
    memory: MemoryHit
    score: float
    parts: dict[str, float]  # raw 0..1 components before weighting
    similarity: float | None  # raw cosine with the query, when the row has a vector
    relevance: float = 0.0  # what the injection floor compares (``search.relevance``)
    evidence: Evidence | None = None  # what the relevance was worked out from

    @property
    def id(self) -> int:
        return int(self.memory["id"])


@dataclass
class SearchOutcome:
    results: list[SearchResult]
    mode: str  # "hybrid" | "keyword"
    keywords: list[str]
    warning: str | None = None
    threshold: float | None = None
    backend: str | None = None
    floor: float = 0.0  # the injection floor in force: injected <=> relevance >= floor
    timings: dict[str, float] = field(default_factory=dict)  # milliseconds per step
    fallback: str | None = None  # why the search ran on keywords only (``Fallback.code``)
    held_back: list[SearchResult] = field(default_factory=list)  # ``held_back``, scored


class Fallback(NamedTuple):
    """Why a search ran on keywords only: one of ``FALLBACK_CODES`` (``busy``: the query was
    shed under load) and the English warning."""

    code: str
    message: str


FALLBACK_CODES = ("busy", "timeout", "failed", "vectors_off", "rebuild", "no_vectors")
