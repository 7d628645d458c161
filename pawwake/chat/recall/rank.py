"""Pure parts of conversation recall: fragment ids, per-session scores, trimming.

Sessions are scored on three parts: keyword (best IDF-weighted share of query terms in one
message) and recency of the newest matching message, each min-max normalised across the
candidate pool, and semantic: the best admitted message's place in the query's neighbourhood
(``search.fusion``, the rule memory search uses), so a pool without a clear match cannot
reach 1.0.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from pawwake.search.fusion import Neighbourhood

MATCH_CHARS = 200
CONTEXT_CHARS = 80
MATCHES_PER_FRAGMENT = 3


def fragment_id(matched_ids: Iterable[int]) -> str:
    """Stable id of a fragment: the same matched messages always give the same id."""
    joined = ",".join(str(i) for i in sorted(set(int(i) for i in matched_ids)))
    digest = hashlib.sha256(("chat-fragment:v1:" + joined).encode("utf-8")).hexdigest()
    return "v1:" + digest[:32]


def trim(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


def min_max(values: Mapping[str, float]) -> dict[str, float]:
    """Scale to 0..1 across the pool; a pool of equal values scores 1 (or 0 when all 0)."""
    if not values:
        return {}
    low, high = min(values.values()), max(values.values())
    if high - low <= 1e-12:
        return {key: (1.0 if high > 0 else 0.0) for key in values}
    return {key: (value - low) / (high - low) for key, value in values.items()}


@dataclass
class SessionHits:
    """What matched in one session."""

    session_id: str
    keyword: float = 0.0  # best message share of query keyword weight
    cosine: float | None = None  # best raw cosine above the threshold
    latest: datetime | None = None  # newest matching message
    message_scores: dict[int, float] = field(default_factory=dict)

    def add(self, message_id: int, created_at: datetime, score: float) -> None:
        self.message_scores[message_id] = max(score, self.message_scores.get(message_id, 0.0))
        if self.latest is None or created_at > self.latest:
            self.latest = created_at

    def matched_ids(self) -> list[int]:
        best = sorted(self.message_scores.items(), key=lambda item: (-item[1], -item[0]))
        return sorted(i for i, _ in best[:MATCHES_PER_FRAGMENT])


@dataclass(frozen=True)
class RankedSession:
    hits: SessionHits
    score: float
    parts: dict[str, float]


def rank_sessions(sessions: Sequence[SessionHits], *, now: datetime,
                  weights: tuple[float, float, float],
                  hood: Neighbourhood | None = None) -> list[RankedSession]:
    """Score and order candidate sessions (best first; ties: newer first, then id)."""
    w_kw, w_sem, w_rec = weights
    keyword = min_max({s.session_id: s.keyword for s in sessions})
    recency = min_max({
        s.session_id: 1.0 / (1.0 + max(0.0, (now - s.latest).total_seconds() / 86400.0))
        for s in sessions if s.latest is not None})
    semantic_by_index = {index: hood.score(s.cosine) for index, s in enumerate(sessions)
                         if s.cosine is not None and hood is not None}
    ranked = []
    for index, s in enumerate(sessions):
        parts = {"keyword": round(keyword.get(s.session_id, 0.0), 6),
                 "semantic": round(semantic_by_index.get(index, 0.0), 6),
                 "recency": round(recency.get(s.session_id, 0.0), 6)}
        score = w_kw * parts["keyword"] + w_sem * parts["semantic"] + w_rec * parts["recency"]
        ranked.append(RankedSession(s, round(score, 6), parts))
    ranked.sort(key=lambda r: (-r.score, -(r.hits.latest.timestamp() if r.hits.latest else 0),
                               r.hits.session_id))
    return ranked
