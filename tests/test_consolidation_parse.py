"""Pure consolidation rules: local days, batches, prompt, answer reading, coverage, drafts."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

import pytest

from pawwake.memory.consolidation import parse
from pawwake.memory.consolidation.parse import AnswerUnreadable, CoverageError


def row(memory_id: int, content: str, created: str, *, layer: int = 1, importance: int = 5,
        event_date: str | None = None, remind_at: datetime | None = None,
        title: str | None = None) -> dict[str, Any]:
    return {"id": memory_id, "content": content, "created_at": datetime.fromisoformat(created),
            "layer": layer, "importance": importance, "title": title, "is_active": True,
            "event_date": date.fromisoformat(event_date) if event_date else None,
            "remind_at": remind_at}


@pytest.mark.parametrize(("created", "tz", "expected"), [
    ("2025-03-01T15:59:59+00:00", 8, "2025-03-01"),
    ("2025-03-01T16:00:00+00:00", 8, "2025-03-02"),
    ("2025-03-01T18:29:00+00:00", 5.5, "2025-03-01"),
    ("2025-03-01T18:30:00+00:00", 5.5, "2025-03-02"),
    ("2025-03-01T04:00:00+00:00", -5, "2025-02-28"),
    ("2025-03-02T00:30:00+08:00", 0, "2025-03-01"),
])
def test_local_date_follows_the_offset(created: str, tz: float, expected: str) -> None:
    assert parse.local_date(row(1, "x", created), tz).isoformat() == expected


def test_event_date_wins_over_creation_time() -> None:
    memory = row(1, "x", "2025-03-09T12:00:00+00:00", event_date="2025-03-01")
    assert parse.local_date(memory, 8) == date(2025, 3, 1)


def test_batches_are_local_days_in_order() -> None:
    rows = [row(5, "late", "2025-03-01T16:30:00+00:00"),
            row(3, "evening", "2025-03-01T15:30:00+00:00"),
            row(9, "dated", "2025-03-09T00:00:00+00:00", event_date="2025-03-01"),
            row(4, "morning", "2025-03-01T01:00:00+00:00")]
    assert parse.batches_by_day(rows, 8) == [
        {"day": "2025-03-01", "ids": [4, 3, 9]},
        {"day": "2025-03-02", "ids": [5]},
    ]
    assert parse.selection_batch(rows, 8) == {"day": None, "ids": [4, 3, 9, 5]}


def test_halving_keeps_order_and_day() -> None:
    assert parse.halve({"day": "2025-03-01", "ids": [1, 2, 3, 4, 5]}) == [
        {"day": "2025-03-01", "ids": [1, 2]}, {"day": "2025-03-01", "ids": [3, 4, 5]}]


def test_prompt_numbers_items_and_keeps_their_text_verbatim() -> None:
    rows = [row(11, "今天和妈妈\n  去了{count}公园", "2025-03-01T02:00:00+00:00", importance=7),
            row(12, "Felt {items} happy", "2025-03-01T03:00:00+00:00")]
    prompt = parse.render_prompt("n={count}\nItems:\n{items}", rows, 8)
    assert prompt == ("n=2\nItems:\n1. [2025-03-01] (importance 7) 今天和妈妈 去了{count}公园\n"
                      "2. [2025-03-01] (importance 5) Felt {items} happy")
    assert "11" not in prompt  # our ids never reach the model


def test_repair_prompt_carries_the_whole_answer() -> None:
    broken = "[{" + "x" * 50_000
    assert parse.render_repair("fix:\n{text}", broken) == "fix:\n" + broken


@pytest.mark.parametrize(("finish", "completion", "expected"), [
    ("length", 10, True), ("stop", 4000, True), ("stop", 5000, True), ("stop", 3999, False),
    ("stop", None, False), (None, None, False),
])
def test_truncation_by_finish_reason_or_usage(finish: str | None, completion: int | None,
                                               expected: bool) -> None:
    assert parse.is_truncated(finish, completion, 4000) is expected


@pytest.mark.parametrize("text", [
    '[{"content": "a", "merged_ids": [1]}]',
    '```json\n[{"content": "a", "merged_ids": [1]}]\n```',
    'Here you go:\n[{"content": "a", "merged_ids": [1]}]\nDone.',
    '{"events": [{"content": "a", "merged_ids": [1]}]}',
    '[{"content": "line\nbreak", "merged_ids": [1]}]',
])
def test_answers_in_common_wrappings_are_read(text: str) -> None:
    assert parse.parse_groups(text)[0]["merged_ids"] == [1]


@pytest.mark.parametrize("text", ["", "no json here", '[{"content": "a", ', '{"x": 1}',
                                  '[{"content": "a"]'])
def test_unreadable_answers_raise(text: str) -> None:
    with pytest.raises(AnswerUnreadable):
        parse.parse_groups(text)


@pytest.mark.parametrize(("groups", "reason"), [
    ([{"content": "a", "merged_ids": [1, 2]}], "left out"),
    ([{"content": "a", "merged_ids": [1, 2]}, {"content": "b", "merged_ids": [2, 3]}],
     "more than once"),
    ([{"content": "a", "merged_ids": [1, 2, 3, 4]}], "not given"),
    ([{"content": "a", "merged_ids": [0, 1, 2, 3]}], "not given"),
    ([{"content": "  ", "merged_ids": [1, 2, 3]}], "empty content"),
    ([{"merged_ids": [1, 2, 3]}], "empty content"),
    ([{"content": "a", "merged_ids": []}, {"content": "b", "merged_ids": [1, 2, 3]}],
     "no merged_ids"),
    ([{"content": "a", "merged_ids": "1,2,3"}], "no merged_ids"),
    ([{"content": "a", "merged_ids": [1, True, 3]}], "not given"),
    (["a"], "not an object"),
])
def test_coverage_failures(groups: list[Any], reason: str) -> None:
    with pytest.raises(CoverageError, match=reason):
        parse.check_coverage(groups, 3)


def test_coverage_accepts_numeric_strings_and_cleans_fields() -> None:
    groups = parse.check_coverage([
        {"title": "  一个非常非常长的标题超过十个字  ", "content": " 内容 ", "importance": 42,
         "merged_ids": ["3", 1.0]},
        {"title": "", "content": "b", "importance": "high", "merged_ids": [2]},
    ], 3)
    assert groups[0] == parse.Group(title="一个非常非常长的标题", content="内容", importance=10,
                                    positions=(2, 0))
    assert groups[1].title is None and groups[1].importance is None


def test_versions_change_with_text_layer_state_and_reminder_only() -> None:
    base = row(1, "原文", "2025-03-01T02:00:00+00:00")
    version = parse.source_version(base)
    assert parse.source_version({**base, "importance": 9, "title": "新"}) == version
    for change in ({"content": "改过"}, {"layer": 3}, {"is_active": False},
                   {"remind_at": datetime(2025, 4, 1, tzinfo=UTC)}):
        assert parse.source_version({**base, **change}) != version
    assert parse.fingerprint({1: "a", 2: "b"}) == parse.fingerprint({2: "b", 1: "a"})
    assert parse.fingerprint({1: "a", 2: "b"}) != parse.fingerprint({1: "a", 2: "c"})


def test_draft_takes_layer_date_and_defaults_from_its_sources() -> None:
    rows = [row(7, "早上跑步", "2025-03-02T01:00:00+00:00", importance=4),
            row(3, "核心：对花生过敏", "2025-03-01T15:30:00+00:00", layer=3, importance=9),
            row(5, "晚上散步", "2025-03-02T12:00:00+00:00", importance=6)]
    group = parse.Group(title=None, content="运动与健康的一天", importance=None,
                        positions=(0, 1))
    draft = parse.build_draft(group, rows, 8, "2025-03-01")
    assert draft["source_ids"] == [3, 7]
    assert [s["id"] for s in draft["sources"]] == [3, 7]  # oldest first
    assert draft["sources"][0]["local_date"] == "2025-03-01"
    assert draft["layer"] == 3 and draft["includes_core"] is True
    assert draft["importance"] == 9 and draft["event_date"] == "2025-03-01"
    assert draft["title"] == "运动与健康的一天"
    plain = parse.build_draft(parse.Group("散步", "散步", 3, (2,)), rows, 8, None)
    assert plain["layer"] == 2 and plain["includes_core"] is False
    assert plain["importance"] == 3 and plain["event_date"] == "2025-03-02"
    assert len(plain["fingerprint"]) == 32


def test_draft_ids_round_trip() -> None:
    assert parse.parse_draft_id(parse.draft_id(12, 3)) == (12, 3)
    for bad in ("12", "a-1", "12-", "-3", "1-2-3", "12 - 3"):
        assert parse.parse_draft_id(bad) is None
