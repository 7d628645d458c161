"""The store's background: the mean of its message vectors, and cosines measured from it.

Embedding models put short chat lines close to one shared direction (the local e5 model gives
unrelated lines cosines of 0.7-0.9), so the lines nearest that direction ("Which one?",
"Hey Maya!", "就是那个时期。") come out near the top for any question. Measured from the mean
of the store's own message vectors (the question's vector and the message's each taken
relative to it), a cosine says how much the two share beyond what every message shares: on
the long-dialogue dev set the evidence turn's median rank among all messages went from 5th to
3rd, and the share ranked in the first 15 from 0.66 to 0.72.

Only the ranking of candidates uses it; the raw cosine still gates what counts as a semantic
match (CONVERSATION_MIN_SCORE_THRESHOLD), so that floor keeps its meaning. The nearest
messages are read in the question's direction away from the background, ``query - mean``: for
unit vectors that orders them by raw cosine minus their cosine with the background, which any
cosine index can do.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

MIN_VECTORS = 20  # fewer message vectors than this: no background, raw cosines
SAMPLE = 4000  # newest vectors averaged on pgvector (the mean of a sample that size is steady)


@dataclass(frozen=True)
class Background:
    """The mean of ``count`` message vectors, and what measuring from it needs."""

    vector: np.ndarray
    count: int

    @property
    def norm2(self) -> float:
        return float(self.vector @ self.vector)

    def direction(self, query: np.ndarray) -> np.ndarray:
        """The question as seen from the background: the nearest messages in this direction
        are those closest to it beyond what all messages share."""
        return np.asarray(query - self.vector, dtype=np.float32)

    def from_query(self, query: np.ndarray) -> QueryFromBackground:
        return QueryFromBackground(float(query @ self.vector), self.norm2)


@dataclass(frozen=True)
class QueryFromBackground:
    """One question's view of the background: ``centred`` needs only each message's raw
    cosine and its dot product with the background (unit vectors)."""

    query_dot: float  # query . mean
    norm2: float  # mean . mean

    def centred(self, raw: float, dot: float) -> float:
        """The cosine of (message - mean) and (query - mean), from message . query (``raw``)
        and message . mean (``dot``)."""
        across = raw - dot - self.query_dot + self.norm2
        lengths = (1.0 - 2.0 * dot + self.norm2) * (1.0 - 2.0 * self.query_dot + self.norm2)
        return across / math.sqrt(lengths) if lengths > 1e-12 else 0.0
