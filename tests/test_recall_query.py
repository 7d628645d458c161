"""What recall reads out of a question: date windows, and the words kept from the model."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pawwake.local_time import zone_at
from pawwake.recall.search import common_terms, named_speaker, names, one_sided, without_terms
from pawwake.recall.variants import variants
from pawwake.recall.when import find_window, without
from pawwake.text import tokens

NOW = datetime(2026, 5, 20, 12, tzinfo=UTC)
UTC8 = zone_at(8)


@pytest.mark.parametrize(("question", "start", "days"), [
    ("What did Maya cook in March 2024?", "2024-03-01", 31),
    ("what happened during march, 2024", "2024-03-01", 31),
    ("2024年3月林晓成功做出了什么菜？", "2024-03-01", 31),
    ("2024年2月12日我们聊了什么", "2024-02-12", 1),
    ("What did we talk about on 12 March 2024?", "2024-03-12", 1),
    ("Anything on March 12, 2024?", "2024-03-12", 1),
    ("2024-02 的对话", "2024-02-01", 29),
    ("what did I say on 2024-02-29", "2024-02-29", 1),
    ("我3月说过什么", "2026-03-01", 31),  # no year: the latest March not after now
    ("我11月说过什么", "2025-11-01", 30),  # ... which for November is last year's
    ("what did I buy in December?", "2025-12-01", 31),
])
def test_a_named_date_is_a_window_in_local_time(question: str, start: str, days: int) -> None:
    window = find_window(question, UTC8, NOW)
    assert window is not None
    local_start = datetime.fromisoformat(start).replace(tzinfo=UTC8)
    assert window.start == local_start.astimezone(UTC)
    assert window.end == (local_start + timedelta(days=days)).astimezone(UTC)
    assert window.holds(window.start) and not window.holds(window.end)


@pytest.mark.parametrize("question", [
    "May I ask what breed the dog is?", "Let's march on", "I ran 5 km in 30 minutes",
    "What did Maya adopt?", "2024年13月", "我们聊过三月的事吗"])
def test_words_that_only_look_like_dates_are_not_windows(question: str) -> None:
    assert find_window(question, UTC8, NOW) is None


def test_the_dates_words_leave_the_keyword_text() -> None:
    window = find_window("What did Maya cook successfully in March 2024?", UTC8, NOW)
    assert without("What did Maya cook successfully in March 2024?", window) == \
        "What did Maya cook successfully in ?"
    assert without("no date here", None) == "no date here"


def test_words_common_to_most_sessions_are_kept_from_the_model() -> None:
    rows = [{"session_id": f"s{i}", "search_terms": ["maya", "hey"] + (["dog"] if i < 2 else [])}
            for i in range(12)]
    assert common_terms(rows, ["maya", "dog", "breed"], sessions=12) == {"maya"}
    assert common_terms(rows, ["maya"], sessions=5) == set()  # too few sessions to tell
    assert without_terms("What breed is the dog Maya's family adopted?", {"maya"}) == \
        "What breed is the dog family adopted?"
    assert without_terms("林晓领养的狗是什么品种？", {"林", "晓"}) == "领养的狗是什么品种？"
    assert without_terms("Maya?", {"maya"}) == "Maya?"  # nothing left to search: as asked


def test_only_the_names_among_common_words_are_kept_from_the_model() -> None:
    # "maya" is said by the other side only (Tom addresses her), "work" by both
    rows = [{"session_id": f"s{i}", "role": "user", "search_terms": ["maya", "work"]}
            for i in range(10)]
    rows += [{"session_id": f"s{i}", "role": "assistant", "search_terms": ["work"]}
             for i in range(10)]
    common = common_terms(rows, ["maya", "work", "unpaid"], sessions=10)
    assert common == {"maya", "work"}
    sides = one_sided(rows, common)
    assert sides == {"maya": "user"}
    assert named_speaker(sides) == "assistant"  # Maya's lines are the other side's
    assert names(common, sides, set()) == {"maya"}
    assert without_terms("What unpaid work has Maya taken up?", names(common, sides, set())) \
        == "What unpaid work has taken up?"
    # a word the dictionary lacks is a name whoever says it; 新 stays: it says what is asked
    assert names({"林", "晓", "新"}, {}, {"林", "晓"}) == {"林", "晓"}
    assert named_speaker({"maya": "user", "tom": "assistant"}) is None  # both named


def test_a_keyword_has_its_variants_from_the_lexicon() -> None:
    tokens.load()  # with the lexicon
    found = variants(["害怕", "afraid"])
    assert {"怕", "恐"} <= set(found["害怕"])  # 害怕 -> afraid, scare -> 怕, 恐, 吓
    assert "scare" in found["afraid"]  # afraid -> 怕, 害怕 -> fear, scare, ...
    assert variants(["怕"]) == {}  # a single character is part of too many words
    assert "恐" not in variants(["害怕", "恐"])["害怕"]  # a keyword already
    assert variants(["豆豆"]) == {}  # a name the lexicon lacks
