"""The JSON in a model's answer, as both readers of our own model calls take it out."""

from __future__ import annotations

import pytest

from pawwake.text.model_json import AnswerNotJson, json_in_answer


def test_fenced_and_prose_wrapped_answers_give_their_value() -> None:
    assert json_in_answer('```json\n{"memories": []}\n```') == {"memories": []}
    assert json_in_answer('Here you go: {"memories": [1]} Hope it helps.') == {"memories": [1]}
    assert json_in_answer('Sure: [1, 2] done') == [1, 2]


def test_only_the_openers_asked_for_start_a_value() -> None:
    assert json_in_answer('Groups {see below}: [[1], [2]]', "[") == [[1], [2]]
    with pytest.raises(AnswerNotJson, match="no JSON"):
        json_in_answer('only {"an": "object"}', "[")


@pytest.mark.parametrize(("answer", "reason"), [
    ("I could not find anything.", "no JSON"),
    ('{"memories": [{"content": ', "unterminated"),
    ('{"memories": [} trailing }', "malformed JSON"),
])
def test_an_answer_without_readable_json_says_why(answer: str, reason: str) -> None:
    with pytest.raises(AnswerNotJson, match=reason):
        json_in_answer(answer)
