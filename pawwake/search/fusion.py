"""Semantic admission and fusion: pure functions, no I/O.

Raw cosines mean little on their own (the local e5 model puts unrelated texts at 0.75-0.86,
a paraphrase can sit at 0.80), but a query's own neighbourhood says a lot: the memory it is
about stands out of the spread of its nearest neighbours. So a semantic candidate is admitted
by rank (among the ``ADMIT_TOP_K`` nearest) and by margin (within ``ADMIT_MARGIN_SD`` standard
deviations of the best), with the per-provider threshold kept only as a floor against noise.
Its semantic part is its place in that neighbourhood,
``(cos - mean) / (max(best, mean + ANCHOR_SD * sd) - mean)`` clipped to 0..1: a best match that
does not stand out clearly is not stretched to 1.0. When the top is flat (the best within
``FLAT_SD`` deviations of the ``FLAT_RANK``-th) and a memory holds every query keyword,
``literal_first`` keeps semantic-only candidates from passing it.

Fusion is a calibrated weighted sum (``scoring.combine``): keyword share and neighbourhood
score carry the relevance, importance and recency only break ties. On the dev set
(``bench/retrieval_quality.py``) it beat reciprocal-rank fusion, kept here for that comparison:
RRF ignores how far ahead a match is and so lets keyword near-misses tie with the clear
semantic answer. The fused score ranks; what the injection floor compares is the relevance of
``search.relevance``, worked out from evidence that does not depend on the store's size.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

NEIGHBOURHOOD = 40  # nearest neighbours fetched per query: the spread is measured on them
ADMIT_TOP_K = 20  # a semantic candidate must be among the query's nearest this many
ADMIT_MARGIN_SD = 4.0  # ... and within this many standard deviations of the best
ANCHOR_SD = 4.0  # the best counts as 1.0 only when it stands this far above the mean
FLAT_RANK = 5  # the top is flat when the best is barely above this neighbour (1-based rank)
FLAT_SD = 1.5  # ... "barely": within this many standard deviations of the spread
RRF_K = 2  # reciprocal-rank constant, used only when comparing fusions



@dataclass(frozen=True)
class Fusion:
    """How a memory's keyword and semantic parts become its rank: the calibrated sum with the
    flat-top literal rule is the product's (``CALIBRATED``); the benchmark passes others
    (reciprocal ranks, no literal rule) down the search to compare, changing nothing global."""

    method: Literal["sum", "rrf"] = "sum"
    literal_first: bool = True


CALIBRATED = Fusion()


@dataclass(frozen=True)
class Neighbourhood:
    """The spread of a query's nearest neighbours, and the noise floor."""

    best: float
    mean: float
    sd: float
    floor: float
    kth: float = -math.inf  # the FLAT_RANK-th best cosine (-inf with fewer neighbours)

    @classmethod
    def of(cls, cosines: Sequence[float], floor: float) -> Neighbourhood | None:
        values = [float(c) for c in cosines]
        if not values:
            return None
        mean = sum(values) / len(values)
        sd = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
        ordered = sorted(values, reverse=True)
        kth = ordered[FLAT_RANK - 1] if len(ordered) >= FLAT_RANK else -math.inf
        return cls(ordered[0], mean, sd, floor, kth)

    @property
    def flat(self) -> bool:
        """No clear best: the best is within ``FLAT_SD`` deviations of the ``FLAT_RANK``-th."""
        return self.best - self.kth <= FLAT_SD * self.sd

    def admits(self, rank: int, cosine: float) -> bool:
        """A neighbour (0-based ``rank`` in cosine order) enters the candidate pool."""
        return (rank < ADMIT_TOP_K and cosine >= self.floor
                and cosine >= self.best - ADMIT_MARGIN_SD * self.sd)

    def score(self, cosine: float) -> float:
        """0..1: where ``cosine`` sits between the neighbourhood's mean and a clear best."""
        if cosine < self.floor:
            return 0.0
        top = max(self.best, self.mean + ANCHOR_SD * self.sd)
        span = top - self.mean
        if span <= 0:
            return 1.0 if cosine >= self.best else 0.0
        return min(1.0, max(0.0, (cosine - self.mean) / span))


def admitted(neighbours: Sequence[tuple[int, float]], hood: Neighbourhood) -> list[int]:
    """Ids of the neighbours (best first) admitted to the pool."""
    ranked = sorted(neighbours, key=lambda item: -item[1])
    return [i for rank, (i, cosine) in enumerate(ranked) if hood.admits(rank, cosine)]


def literal_first(keyword: Mapping[int, float], semantic: Mapping[int, float],
                  hood: Neighbourhood | None, keyword_weight: float,
                  semantic_weight: float) -> dict[int, float]:
    """Semantic parts after the literal rule: when the query's neighbourhood has a flat top,
    a candidate with no keyword match is held to the relevance of the best full keyword match.

    Why: a flat top (several neighbours at nearly the same cosine, none standing out) says the
    model does not know which memory is meant; its scores there are near-miss noise of the
    same topic or language. A memory containing every query keyword is then the better
    evidence, so semantic-only candidates are scaled down (keeping their order) to tie it at
    most (importance and recency decide a tie).
    With a clear best the parts are untouched: the model's answer beats keyword near-misses.
    """
    parts = dict(semantic)
    if hood is None or not hood.flat or semantic_weight <= 0:
        return parts
    full = [parts.get(i, 0.0) for i, k in keyword.items() if k >= 1.0]
    if not full:
        return parts
    cap = max(full) + keyword_weight / semantic_weight
    alone = [i for i in parts if keyword.get(i, 0.0) <= 0.0]
    top = max((parts[i] for i in alone), default=0.0)
    if top > cap:  # scaled, not clipped, so the model's own order among them stays
        for i in alone:
            parts[i] *= cap / top
    return parts


def reciprocal_ranks(keyword: Mapping[int, float], semantic: Mapping[int, float]
                     ) -> dict[int, tuple[float, float]]:
    """For comparison only: each part replaced by ``(RRF_K + 1) / (RRF_K + rank)`` in its own
    list (1.0 for the first, 0 when absent), so ``scoring.combine`` sums reciprocal ranks."""
    def ranks(scores: Mapping[int, float]) -> dict[int, float]:
        ordered = sorted((i for i, v in scores.items() if v > 0), key=lambda i: (-scores[i], -i))
        return {i: (RRF_K + 1) / (RRF_K + r) for r, i in enumerate(ordered, 1)}

    by_keyword, by_semantic = ranks(keyword), ranks(semantic)
    return {i: (by_keyword.get(i, 0.0), by_semantic.get(i, 0.0))
            for i in {*keyword, *semantic}}
