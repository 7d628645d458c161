"""Pure parts of conversation recall: message scores, sessions ranked by their messages,
fragment ids, trimming.

Every candidate message is scored on its own evidence: keyword (the IDF-weighted share of the
query's keywords it holds), semantic (its cosine's place in the query's neighbourhood,
``search.fusion``, the rule memory search uses, so a pool without a clear match cannot reach
1.0), recency (``1 / (1 + days)`` of its own age, so it decides between equals without
stretching a month's difference to full marks) and, when the question names a date, whether
the message falls in that window. A session ranks by its best message, plus a small share of
its next best (``SUPPORT``): a conversation that keeps returning to the question's topic beats
one stray line. The fragment's matched messages are the session's best-scoring messages, so
the line that answers is among them, not only its session.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from pawwake.chat.recall.when import TimeWindow
from pawwake.search.fusion import Neighbourhood

MATCH_CHARS = 200
CONTEXT_CHARS = 80
MATCHES_PER_FRAGMENT = 3
SUPPORT = 0.2  # weight of a session's second and third best messages in its score
DATE_WEIGHT = 0.3  # what being in the question's date window adds to a message's score


def fragment_id(matched_ids: Iterable[int]) -> str:
    """Stable id of a fragment: the same matched messages always give the same id."""
    joined = ",".join(str(i) for i in sorted(set(int(i) for i in matched_ids)))
    digest = hashlib.sha256(("chat-fragment:v1:" + joined).encode("utf-8")).hexdigest()
    return "v1:" + digest[:32]


def trim(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


def recency(created_at: datetime, now: datetime) -> float:
    return 1.0 / (1.0 + max(0.0, (now - created_at).total_seconds() / 86400.0))


@dataclass
class MessageHit:
    """One candidate message and what it shares with the query."""

    id: int
    session_id: str
    created_at: datetime
    keyword: float = 0.0  # share of the query's keyword weight present in the message
    cosine: float | None = None  # raw cosine with the query, when the message has a vector


@dataclass(frozen=True)
class ScoredMessage:
    hit: MessageHit
    score: float
    parts: dict[str, float]


@dataclass(frozen=True)
class Weights:
    keyword: float
    semantic: float
    recency: float


def score_message(hit: MessageHit, *, now: datetime, weights: Weights,
                  hood: Neighbourhood | None, window: TimeWindow | None) -> ScoredMessage:
    semantic = hood.score(hit.cosine) if hood is not None and hit.cosine is not None else 0.0
    parts = {"keyword": round(hit.keyword, 6), "semantic": round(semantic, 6),
             "recency": round(recency(hit.created_at, now), 6)}
    score = (weights.keyword * parts["keyword"] + weights.semantic * parts["semantic"]
             + weights.recency * parts["recency"])
    if window is not None:
        parts["date"] = 1.0 if window.holds(hit.created_at) else 0.0
        score += DATE_WEIGHT * parts["date"]
    return ScoredMessage(hit, round(score, 6), parts)


@dataclass(frozen=True)
class RankedSession:
    session_id: str
    score: float
    parts: dict[str, float]  # the best message's
    matched: tuple[ScoredMessage, ...]  # best first, at most MATCHES_PER_FRAGMENT

    @property
    def matched_ids(self) -> list[int]:
        return sorted(m.hit.id for m in self.matched)

    @property
    def latest(self) -> datetime:
        return max(m.hit.created_at for m in self.matched)


def rank_sessions(messages: Iterable[MessageHit], *, now: datetime, weights: Weights,
                  hood: Neighbourhood | None = None, window: TimeWindow | None = None
                  ) -> list[RankedSession]:
    """Sessions holding a relevant message, best first (ties: newer first, then id).

    A message counts when it shares a keyword or scores above the neighbourhood's mean;
    recency and the date window only order what is relevant."""
    by_session: dict[str, list[ScoredMessage]] = {}
    for hit in messages:
        scored = score_message(hit, now=now, weights=weights, hood=hood, window=window)
        if scored.parts["keyword"] <= 0 and scored.parts["semantic"] <= 0:
            continue
        by_session.setdefault(hit.session_id, []).append(scored)
    ranked = []
    for session_id, scored_messages in by_session.items():
        best = sorted(scored_messages, key=lambda m: (-m.score, -m.hit.id))
        top = best[:MATCHES_PER_FRAGMENT]
        score = top[0].score + SUPPORT * sum(m.score for m in top[1:])
        ranked.append(RankedSession(session_id, round(score, 6), top[0].parts, tuple(top)))
    ranked.sort(key=lambda r: (-r.score, -r.latest.timestamp(), r.session_id))
    return ranked

