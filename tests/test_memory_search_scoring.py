"""The pure scoring functions of memory search."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from pawwake.memory import fusion, scoring
from pawwake.settings import Settings
from pawwake.text.tokens import idf_weight


def test_keyword_score_is_the_idf_weighted_share_of_query_terms() -> None:
    weights = [idf_weight(100, 1), idf_weight(100, 50)]  # a rare and a common term
    assert weights[0] > weights[1]
    rare_only = scoring.keyword_score(weights[0], sum(weights))
    common_only = scoring.keyword_score(weights[1], sum(weights))
    assert rare_only > 0.5 > common_only
    assert rare_only + common_only == pytest.approx(1.0)
    assert scoring.keyword_score(0.0, 0.0) == 0.0


def test_anchored_normalisation_keeps_a_weak_pool_below_one() -> None:
    threshold = 0.87
    weak = {1: 0.84, 2: 0.80, 3: 0.76}
    normalised = scoring.normalise_semantic(weak, weak.values(), threshold)
    assert normalised[3] == 0.0
    assert normalised[1] == pytest.approx((0.84 - 0.76) / (0.87 - 0.76))
    assert normalised[1] < 0.75
    # Plain min-max would have stretched the weak best to 1.0.
    strong = {1: 0.91, 2: 0.80, 3: 0.76}
    assert scoring.normalise_semantic(strong, strong.values(), threshold)[1] == 1.0


def test_normalisation_uses_the_whole_pool_minimum() -> None:
    pool = [0.95, 0.90, 0.70]
    normalised = scoring.normalise_semantic({7: 0.90}, pool, 0.87)
    assert normalised[7] == pytest.approx((0.90 - 0.70) / (0.95 - 0.70))


def test_a_single_vector_pool_is_all_or_nothing() -> None:
    assert scoring.normalise_semantic({1: 0.9}, [0.9], 0.87) == {1: 1.0}
    assert scoring.normalise_semantic({1: 0.87}, [0.87], 0.87) == {1: 1.0}
    assert scoring.normalise_semantic({}, [], 0.87) == {}


def test_a_weak_keyword_hit_stays_below_the_floor_in_a_weak_pool() -> None:
    weights = scoring.hybrid_weights(Settings.from_env({}))
    pool = [0.80, 0.79, 0.785, 0.78, 0.775, 0.77, 0.765, 0.76]
    hood = fusion.Neighbourhood.of(pool, 0.78)
    semantic = hood.score(0.78)  # no neighbour stands out: nothing is stretched to 1.0
    score = scoring.combine(weights, keyword=0.1, semantic=semantic, importance=3,
                            recency_value=0.01)
    assert score < 0.15
    unanchored = scoring.combine(weights, keyword=0.1, semantic=(0.78 - 0.76) / (0.80 - 0.76),
                                 importance=3, recency_value=0.01)
    assert unanchored >= 0.15


def test_hybrid_weights_come_from_settings() -> None:
    default = scoring.hybrid_weights(Settings.from_env({}))
    assert (default.keyword, default.semantic, default.importance, default.recency) == (
        0.25, 0.65, 0.05, 0.05)
    score = scoring.combine(default, keyword=1.0, semantic=0.5, importance=6, recency_value=0.5)
    assert score == pytest.approx(0.25 + 0.325 + 0.03 + 0.025)
    keyword_only = scoring.combine(scoring.KEYWORD_ONLY, keyword=1.0, semantic=1.0,
                                   importance=5, recency_value=1.0)
    assert keyword_only == pytest.approx(0.5 + 0.15 + 0.2)


def test_recency_counts_days_from_the_event_date_when_set() -> None:
    now = datetime(2026, 11, 29, 20, 0, tzinfo=UTC)
    today = scoring.local_today(now, 8.0)
    assert today == date(2026, 11, 30)  # 04:00 the next day in UTC+8
    created = now - timedelta(days=2)
    assert scoring.age_days(created, None, now, today) == pytest.approx(2.0)
    assert scoring.age_days(created, date(2026, 11, 20), now, today) == 10.0
    assert scoring.age_days(created, date(2026, 12, 5), now, today) == 5.0  # upcoming
    assert scoring.recency(0.0) == 1.0 and scoring.recency(1.0) == 0.5
    future_created = now + timedelta(hours=1)  # clock skew never gives recency above 1
    assert scoring.age_days(future_created, None, now, today) == 0.0
