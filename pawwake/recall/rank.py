"""Pure parts of conversation recall: message scores, sessions ranked by their messages,
fragment ids, trimming.

Every candidate message is scored on its own evidence:

- keyword: the IDF-weighted share of the query's keywords it holds, none when those are only
  words common to many sessions (the two people's names) and meaning is weighed;
- semantic: its cosine measured from the store's background (``recall.background``), placed
  on the question's own scale (``SemanticScale``: from a little below the mean of its nearest
  messages to a clear best), and read together with the turn next to it: an answer often
  means something only with the question before it ("mango sorbet, no contest."), so a
  message takes ``NEIGHBOUR_SHARE`` of an adjacent message's evidence when that is higher;
  a raw cosine below the provider's floor is no semantic evidence at all, and neither is a
  line said word for word in another session too (``repeated_lines``): "Unfortunately.
  What's up?" or "就是那个时期。" sits near many questions and tells no conversation apart;
- recency: ``1 / (1 + days)`` of its own age, so it decides between equals;
- when the question names a date, whether the message falls in that window; when it asks
  "when", whether the message places something in time ("yesterday", "昨天下午"): the
  message that pins an event's day is the answer;
- when the question names one of the two people (``search.named_speaker``), whether that
  person wrote the message (``SPEAKER_WEIGHT``): "What is Maya afraid of?" is answered by a
  line of Maya's, and the other person's lines on the same topic are the near misses.

A session ranks by its best message, plus a small share of its next best (``SUPPORT``): a
conversation that keeps returning to the question's topic beats one stray line. The
fragment's matched messages are the session's best-scoring messages, so the line that answers
is among them, not only its session.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from pawwake.recall.when import TimeWindow

MATCH_CHARS = 200
CONTEXT_CHARS = 80
MATCHES_PER_FRAGMENT = 3
SUPPORT = 0.3  # weight of a session's second and third best messages in its score
DATE_WEIGHT = 0.3  # what being in the question's date window adds to a message's score
TIME_WEIGHT = 0.15  # what placing something in time adds when the question asks "when"
SPEAKER_WEIGHT = 0.1  # what being written by the person the question names adds
NEIGHBOUR_SHARE = 0.3  # of an adjacent message's semantic evidence, when higher than its own
SCALE_ZERO_SD = 1.0  # semantic 0 sits this many deviations below the nearest messages' mean
SCALE_TOP_SD = 6.0  # ... and 1.0 at the best, or this far above the mean if nothing stands out


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
    centred: float | None = None  # the cosine measured from the background (else the raw one)
    prev_id: int | None = None  # the searchable messages around it in its session
    next_id: int | None = None
    timed: bool = False  # its text places something in time (looked at for "when" questions)
    only_common: bool = False  # of the query's keywords it holds only common ones (names...)
    role: str | None = None  # who wrote it (user, assistant), when known


@dataclass(frozen=True)
class SemanticScale:
    """Where a message's semantic evidence sits among the question's nearest messages.

    0 is ``SCALE_ZERO_SD`` deviations below their mean (a message somewhat closer than the
    crowd still counts a little: on the dev set, starting at the mean left a fifth of the
    answers with no semantic evidence at all); 1.0 is the best, or ``SCALE_TOP_SD`` deviations
    above the mean when nothing stands out, so a pool without a clear match cannot reach it.
    ``floor`` is the raw cosine below which a message has no semantic evidence."""

    zero: float
    top: float
    floor: float

    @classmethod
    def of(cls, nearest: Sequence[float], floor: float) -> SemanticScale | None:
        """From the (centred) cosines of the question's nearest messages."""
        if not nearest:
            return None
        mean = sum(nearest) / len(nearest)
        sd = math.sqrt(sum((v - mean) ** 2 for v in nearest) / len(nearest))
        return cls(mean - SCALE_ZERO_SD * sd, max(max(nearest), mean + SCALE_TOP_SD * sd),
                   floor)

    def score(self, evidence: float) -> float:
        span = self.top - self.zero
        if span <= 0:
            return 1.0 if evidence >= self.top else 0.0
        return min(1.0, max(0.0, (evidence - self.zero) / span))


def repeated_lines(hits: Mapping[int, MessageHit]) -> set[int]:
    """Candidates whose text was said in another session too: their cosines with the question
    and the background are the same to six places (one text, one vector), so no text needs
    reading. Such a line (a greeting, "Which one?", a stock reply) comes out near many
    questions because it is short and says little; word for word in two conversations, it
    tells neither apart. On the long-dialogue dev set the first five fragments held a line
    repeated elsewhere for about half of their wrong matches."""
    keys = {i: (round(h.cosine, 6), round(h.centred, 6)) for i, h in hits.items()
            if h.cosine is not None and h.centred is not None}
    sessions: dict[tuple[float, float], set[str]] = {}
    for message_id, key in keys.items():
        sessions.setdefault(key, set()).add(hits[message_id].session_id)
    return {i for i, key in keys.items() if len(sessions[key]) > 1}


def semantic_evidence(hits: Mapping[int, MessageHit], floor: float) -> dict[int, float]:
    """Each message's semantic evidence: its centred cosine when its raw cosine reaches
    ``floor``, or ``NEIGHBOUR_SHARE`` of the way to an adjacent message's when that one
    reaches the floor and is higher (a short reply below the floor on its own, "plain
    vanilla, no contest.", still answers the question asked just before it); none for a
    line repeated in another session (``repeated_lines``), nor does it lend any."""
    repeated = repeated_lines(hits)
    centred = {i: h.centred for i, h in hits.items()
               if h.centred is not None and i not in repeated}
    passing = {i for i, h in hits.items()
               if h.cosine is not None and h.cosine >= floor and i in centred}
    evidence = {}
    for message_id, value in centred.items():
        hit = hits[message_id]
        best = value if message_id in passing else None
        for neighbour in (hit.prev_id, hit.next_id):
            if neighbour in passing and centred[neighbour] > value:
                pulled = value + NEIGHBOUR_SHARE * (centred[neighbour] - value)
                best = pulled if best is None else max(best, pulled)
        if best is not None:
            evidence[message_id] = best
    return evidence


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


@dataclass(frozen=True)
class Question:
    """What the question asks beyond its words: a date window, whether it asks "when", and
    which side of the conversation (user, assistant) the person it names is."""

    window: TimeWindow | None = None
    asks_when: bool = False
    speaker: str | None = None


def score_message(hit: MessageHit, *, now: datetime, weights: Weights, semantic: float,
                  question: Question) -> ScoredMessage:
    # "Hey Maya!" shares only who is talking with "What is Maya afraid of?": where meaning is
    # weighed, such a line is no keyword match (keyword mode still has nothing better)
    keyword = 0.0 if hit.only_common and weights.semantic > 0 else hit.keyword
    parts = {"keyword": round(keyword, 6), "semantic": round(semantic, 6),
             "recency": round(recency(hit.created_at, now), 6)}
    score = (weights.keyword * parts["keyword"] + weights.semantic * parts["semantic"]
             + weights.recency * parts["recency"])
    if question.window is not None:
        parts["date"] = 1.0 if question.window.holds(hit.created_at) else 0.0
        score += DATE_WEIGHT * parts["date"]
    if question.asks_when:
        parts["time"] = 1.0 if hit.timed else 0.0
        score += TIME_WEIGHT * parts["time"]
    if question.speaker is not None:
        parts["speaker"] = 1.0 if hit.role == question.speaker else 0.0
        score += SPEAKER_WEIGHT * parts["speaker"]
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
                  scale: SemanticScale | None = None, question: Question = Question()
                  ) -> list[RankedSession]:
    """Sessions holding a relevant message, best first (ties: newer first, then id).

    A message counts when it shares a keyword or has semantic evidence above the scale's
    zero; recency, the date window and time words only order what is relevant."""
    hits = {hit.id: hit for hit in messages}
    evidence = semantic_evidence(hits, scale.floor) if scale is not None else {}
    by_session: dict[str, list[ScoredMessage]] = {}
    for hit in hits.values():
        semantic = scale.score(evidence[hit.id]) if hit.id in evidence and scale else 0.0
        scored = score_message(hit, now=now, weights=weights, semantic=semantic,
                               question=question)
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
