"""The pure parts of a message's evidence in conversation recall: cosines measured from the
store's background, a reply read with the turn before it, and the time words a "when"
question looks for."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from pawwake.recall.background import Background
from pawwake.recall.rank import (
    MessageHit,
    Question,
    SemanticScale,
    Weights,
    rank_sessions,
    semantic_evidence,
)
from pawwake.recall.when import asks_when, mentions_time

NOW = datetime(2026, 1, 10, tzinfo=UTC)


def _unit(v: np.ndarray) -> np.ndarray:
    return np.asarray(v / np.linalg.norm(v), dtype=np.float64)


def test_a_cosine_from_the_background_needs_only_two_dot_products() -> None:
    """What ranking computes from (message . query, message . mean) is the cosine of the two
    vectors taken relative to the mean, and the direction the index is read in orders
    messages by it up to their distance from the mean."""
    rng = np.random.default_rng(7)
    shared = _unit(rng.normal(size=16))
    messages = [_unit(shared * 8 + rng.normal(size=16)) for _ in range(40)]
    query = _unit(shared * 8 + rng.normal(size=16))
    background = Background(np.mean(messages, axis=0), len(messages))
    seen = background.from_query(query)
    for m in messages:
        expected = float(_unit(m - background.vector) @ _unit(query - background.vector))
        assert seen.centred(float(m @ query), float(m @ background.vector)) == \
            pytest.approx(expected, abs=1e-9)
    # the shared direction lifts every raw cosine; from the background it is gone
    raw = [float(m @ query) for m in messages]
    centred = [seen.centred(float(m @ query), float(m @ background.vector)) for m in messages]
    assert min(raw) > 0.5 and abs(float(np.mean(centred))) < 0.3


def _hit(message_id: int, cosine: float | None, *, prev: int | None = None,
         nxt: int | None = None, session: str = "s", keyword: float = 0.0) -> MessageHit:
    return MessageHit(message_id, session, NOW, keyword=keyword, cosine=cosine,
                      centred=cosine, prev_id=prev, next_id=nxt)


def test_a_reply_below_the_floor_takes_a_share_of_the_question_before_it() -> None:
    """"If you could only eat one ice cream flavour forever?" matches; "Plain vanilla, no
    contest." says little by itself but is the answer."""
    hits = {1: _hit(1, 0.90, nxt=2), 2: _hit(2, 0.74, prev=1, nxt=3),
            3: _hit(3, 0.70, prev=2), 4: _hit(4, 0.70)}
    evidence = semantic_evidence(hits, floor=0.78)
    assert evidence[1] == pytest.approx(0.90)
    assert 0.74 < evidence[2] < 0.90  # pulled part of the way towards its question
    assert 3 not in evidence and 4 not in evidence  # no matching neighbour: nothing
    hits[5] = _hit(5, 0.80, nxt=6)
    hits[6] = _hit(6, 0.85, prev=5)
    evidence = semantic_evidence(hits, floor=0.78)
    assert evidence[6] == pytest.approx(0.85)  # a lower neighbour takes nothing away
    assert 0.80 < evidence[5] < 0.85


def test_the_reply_is_among_the_matched_messages_of_its_session() -> None:
    scale = SemanticScale.of([0.90] + [0.70 + 0.002 * i for i in range(39)], 0.78)
    hits = [_hit(1, 0.90, nxt=2), _hit(2, 0.72, prev=1, nxt=3), _hit(3, 0.71, prev=2)]
    ranked = rank_sessions(hits, now=NOW, weights=Weights(0.45, 0.35, 0.2), scale=scale)
    assert [m.hit.id for m in ranked[0].matched] == [1, 2]


@pytest.mark.parametrize(("question", "asks"), [
    ("When did Maya move into the new flat?", True),
    ("What day did Tom pass the exam?", True),
    ("林晓哪天完赛的？", True),
    ("阿杰是什么时候通过考试的？", True),
    ("王芳几号搬家？", True),
    ("What did Maya cook?", False),
    ("林晓养的狗叫什么？", False),
])
def test_a_question_that_asks_when(question: str, asks: bool) -> None:
    assert asks_when(question) is asks


@pytest.mark.parametrize(("text", "timed"), [
    ("I passed the exam this afternoon!!!", True),
    ("Finished an open-water swim yesterday, legs are jelly.", True),
    ("We moved in last weekend.", True),
    ("我昨天跑完了半马。", True),
    ("今天下午法考过了！", True),
    ("三天前搬进了新家。", True),
    ("I love swimming in the sea.", False),
    ("我从小就怕打雷。", False),
])
def test_words_that_place_a_message_in_time(text: str, timed: bool) -> None:
    assert mentions_time(text) is timed


def test_a_when_question_prefers_the_message_that_pins_the_day() -> None:
    old = NOW - timedelta(days=30)
    pinned = MessageHit(1, "a", old, keyword=0.5, timed=True)
    undated = MessageHit(2, "b", old, keyword=0.5)
    weights = Weights(0.45, 0.35, 0.2)
    ranked = rank_sessions([undated, pinned], now=NOW, weights=weights,
                           question=Question(asks_when=True))
    assert [r.session_id for r in ranked] == ["a", "b"] and ranked[0].parts["time"] == 1.0
    ranked = rank_sessions([undated, pinned], now=NOW, weights=weights)
    assert "time" not in ranked[0].parts


def test_a_line_holding_only_the_names_is_no_keyword_match_where_meaning_is_weighed() -> None:
    """"老周现在开的是什么车？" keeps only the name as a keyword; every "老周，忙完了没？" holds it
    in full. With vectors, the line about the car wins; in keyword mode the name still finds."""
    greeting = MessageHit(1, "hello", NOW, keyword=1.0, cosine=0.80, centred=0.80,
                          only_common=True)
    answer = _hit(2, 0.90, session="car")
    scale = SemanticScale.of([0.90] + [0.78 + 0.002 * i for i in range(39)], 0.78)
    ranked = rank_sessions([greeting, answer], now=NOW, weights=Weights(0.45, 0.35, 0.2),
                           scale=scale)
    assert ranked[0].session_id == "car"
    assert all(r.parts["keyword"] == 0.0 for r in ranked)
    ranked = rank_sessions([greeting], now=NOW, weights=Weights(0.45, 0.0, 0.2))
    assert ranked[0].parts["keyword"] == 1.0


def test_a_line_said_in_several_sessions_is_no_semantic_evidence() -> None:
    """"What unpaid work has Maya taken up?": the stock reply "Unfortunately. What's up?" of
    three sessions sits nearer the question than "I started volunteering on a beach clean-up
    crew"; said word for word in three conversations, it tells none of them apart."""
    stock = [MessageHit(i, f"chat-{i}", NOW, cosine=0.86, centred=0.40) for i in (1, 2, 3)]
    answer = MessageHit(4, "beach", NOW, cosine=0.83, centred=0.30, next_id=5)
    reply = MessageHit(5, "beach", NOW, cosine=0.80, centred=0.20, prev_id=4)
    scale = SemanticScale.of([0.40, 0.40, 0.40, 0.30] + [0.05 + 0.002 * i for i in range(36)],
                             0.72)
    ranked = rank_sessions([*stock, answer, reply], now=NOW, weights=Weights(0.45, 0.35, 0.2),
                           scale=scale)
    assert [r.session_id for r in ranked] == ["beach"]
    assert [m.hit.id for m in ranked[0].matched] == [4, 5]
    # once, in one session (or twice within it), the same line is evidence as before
    ranked = rank_sessions([stock[0], answer], now=NOW, weights=Weights(0.45, 0.35, 0.2),
                           scale=scale)
    assert ranked[0].session_id == "chat-1"
