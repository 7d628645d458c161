"""The pure scoring functions of memory search."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from pawwake.local_time import local_today, zone_at
from pawwake.search import fusion, relevance, scoring
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


def spread(best: float, size: int = 40) -> list[float]:
    """A neighbourhood: ``best`` then a tail falling from 0.80 by 0.001 a neighbour."""
    return [best] + [0.80 - 0.001 * i for i in range(size - 1)]


def test_a_neighbour_that_stands_out_scores_full_marks_and_a_flat_pool_does_not() -> None:
    clear = fusion.Neighbourhood.of(spread(0.86), 0.78)
    assert clear.score(0.86) == 1.0  # far above the spread, though below the seed's 0.87
    flat = fusion.Neighbourhood.of(spread(0.801), 0.78)
    assert flat.score(0.801) < 0.75  # plain min-max would have stretched it to 1.0
    assert flat.score(0.77) == 0.0  # under the noise floor


def test_admission_is_by_rank_margin_and_floor() -> None:
    cosines = spread(0.86)
    neighbours = list(enumerate(cosines))
    hood = fusion.Neighbourhood.of(cosines, 0.78)
    admitted = fusion.admitted(neighbours, hood)
    assert admitted[0] == 0 and len(admitted) <= fusion.ADMIT_TOP_K
    assert all(cosines[i] >= 0.78 for i in admitted)
    assert all(cosines[i] >= hood.best - fusion.ADMIT_MARGIN_SD * hood.sd for i in admitted)
    high_floor = fusion.Neighbourhood.of(cosines, 0.87)
    assert fusion.admitted(neighbours, high_floor) == []
    assert fusion.Neighbourhood.of([], 0.78) is None


def test_a_full_keyword_match_is_not_outranked_in_a_flat_top_but_a_clear_best_still_wins(
) -> None:
    # Five same-language neighbours at nearly one cosine, the literal memory further down.
    flat_pool = [0.851, 0.849, 0.848, 0.846, 0.845] + [0.80 - 0.001 * i for i in range(35)]
    flat = fusion.Neighbourhood.of(flat_pool, 0.78)
    assert flat.flat
    keyword = {1: 0.0, 2: 0.0, 3: 0.0, 9: 1.0}  # 9 holds every query keyword
    semantic = {1: flat.score(0.851), 2: flat.score(0.849), 3: flat.score(0.848),
                9: flat.score(0.77)}
    held = fusion.literal_first(keyword, semantic, flat, 0.25, 0.65)

    def rel(parts: dict[int, float], i: int) -> float:  # the fused score's relevance share
        return (0.25 * keyword[i] + 0.65 * parts[i]) / 0.9

    assert max(rel(semantic, i) for i in (1, 2, 3)) > rel(semantic, 9)  # the miss, unheld
    assert max(rel(held, i) for i in (1, 2, 3)) <= rel(held, 9) + 1e-9
    assert held[1] >= held[2] >= held[3] > 0.0  # scaled: the model's order stays
    assert held[9] == semantic[9]
    # A neighbour that stands out is the model's answer: nothing is held back.
    clear = fusion.Neighbourhood.of(spread(0.86), 0.78)
    assert not clear.flat
    standing = {1: clear.score(0.86), 9: clear.score(0.77)}
    assert fusion.literal_first({1: 0.0, 9: 1.0}, standing, clear, 0.25, 0.65) == standing
    # Without a full keyword match (a near-miss only) a flat top is left as it is.
    assert fusion.literal_first({1: 0.0, 9: 0.6}, semantic, flat, 0.25, 0.65) == semantic


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
    today = local_today(zone_at(8.0), now)
    assert today == date(2026, 11, 30)  # 04:00 the next day in UTC+8
    created = now - timedelta(days=2)
    assert scoring.age_days(created, None, now, today) == pytest.approx(2.0)
    assert scoring.age_days(created, date(2026, 11, 20), now, today) == 10.0
    assert scoring.age_days(created, date(2026, 12, 5), now, today) == 5.0  # upcoming
    assert scoring.recency(0.0) == 1.0 and scoring.recency(1.0) == 0.5
    future_created = now + timedelta(hours=1)  # clock skew never gives recency above 1
    assert scoring.age_days(future_created, None, now, today) == 0.0


def test_more_relevant_results_than_the_limit_keep_the_most_relevant() -> None:
    """Dozens of other people's birthdays score above the user's own (keywords, cosine) and
    are all relevant enough; the user's, whose written question is the one asked, is the
    most relevant and must not be cut by the limit. Fewer relevant than the limit: the best
    by score, a relevant one taking the place of one that is not."""
    from pawwake.memory.search.ranking import within_limit
    from pawwake.memory.search.results import SearchResult

    def result(memory_id: int, score: float, relevant: float) -> SearchResult:
        return SearchResult({"id": memory_id}, score, {}, None, relevant)  # type: ignore[arg-type]

    theirs = [result(n, 0.9 - n / 100, 0.98) for n in range(1, 6)]
    mine = result(99, 0.5, 0.999)
    kept = within_limit([*theirs, mine], 3, 0.5)
    assert 99 in [r.id for r in kept] and len(kept) == 3
    assert [r.score for r in kept] == sorted((r.score for r in kept), reverse=True)
    loose = [result(1, 0.9, 0.1), result(2, 0.8, 0.2), result(3, 0.7, 0.6)]
    assert [r.id for r in within_limit(loose, 2, 0.5)] == [1, 3]


def test_the_relevance_bar_moves_with_the_store_size_on_both_sides_of_a_hundred() -> None:
    model = relevance.Relevance()
    clear = relevance.Evidence(standing=4.5, keyword=0.0, cross=False, store_size=8)
    assert model.many(100) == 0.0
    assert model.many(5) < model.many(20) < 0.0 < model.many(10_000)
    assert model.many(1) == model.many(5)  # below the smallest store measured it stays
    assert model.of(clear) > 0.5 > model.of(relevance.Evidence(4.5, 0.0, False, 100))
    # keyword-only search keeps its flat bar below a hundred
    named = relevance.Evidence(standing=None, keyword=0.3, cross=False, store_size=8)
    assert model.of(named) == model.of(relevance.Evidence(None, 0.3, False, 100))
