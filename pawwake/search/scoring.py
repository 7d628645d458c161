"""Memory search scoring: pure functions, no I/O, so every formula is unit-testable.

Hybrid: ``wk*kw + ws*sem + wi*importance/10 + wr*recency`` (weights from settings, 0.25 / 0.65 /
0.05 / 0.05 by default: relevance decides, importance and recency break ties; ``sem`` is the
neighbourhood score of ``fusion``); keyword-only: ``0.5*kw + 0.3*importance/10 + 0.2*recency``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any


@dataclass(frozen=True)
class Weights:
    keyword: float
    semantic: float
    importance: float
    recency: float


KEYWORD_ONLY = Weights(keyword=0.5, semantic=0.0, importance=0.3, recency=0.2)


def hybrid_weights(settings: Mapping[str, Any]) -> Weights:
    return Weights(keyword=float(settings.MEMORY_HW_KEYWORD),
                   semantic=float(settings.MEMORY_HW_SEMANTIC),
                   importance=float(settings.MEMORY_HW_IMPORTANCE),
                   recency=float(settings.MEMORY_HW_RECENCY))


def age_days(created_at: datetime, event_date: date | None, now: datetime,
             today: date) -> float:
    """Days between now and the memory: its event date when set (either direction, so an
    upcoming event is as near as a recent one), else its creation time."""
    if event_date is not None:
        return float(abs((today - event_date).days))
    return max(0.0, (now - created_at).total_seconds() / 86400.0)


def recency(days: float) -> float:
    return 1.0 / (1.0 + days)


def keyword_score(hit_weight: float, total_weight: float) -> float:
    """IDF-weighted share of the query keywords present: ``sum(w*hit) / sum(w)``."""
    if total_weight <= 0:
        return 0.0
    return min(1.0, max(0.0, hit_weight / total_weight))


def combine(weights: Weights, *, keyword: float, semantic: float, importance: int,
            recency_value: float) -> float:
    return (weights.keyword * keyword + weights.semantic * semantic
            + weights.importance * importance / 10.0 + weights.recency * recency_value)
