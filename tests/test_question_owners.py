"""The question -> memory map of the numpy question index, held in arrays."""

from __future__ import annotations

import numpy as np
import pytest

from pawwake.memory import question_owners
from pawwake.memory.question_owners import QuestionOwners


def test_owners_and_questions_through_tail_and_merges(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(question_owners, "MERGE_AT", 8)
    owners = QuestionOwners()
    rng = np.random.default_rng(3)
    expected: dict[int, int] = {}
    question = 100
    for batch in range(30):
        pairs = []
        for _ in range(int(rng.integers(1, 6))):
            question += int(rng.integers(1, 4))
            pairs.append((question, int(rng.integers(1, 12))))
        pairs += list(expected.items())[-3:]  # a refresh reads the newest ones again
        if batch % 7 == 0:
            pairs.reverse()
        owners.learn(pairs)
        expected.update((q, m) for q, m in pairs if q not in expected)
        assert len(owners) == len(expected)
        assert owners.newest == max(expected)
    for q, m in expected.items():
        assert owners.owner(q) == m
    assert owners.owner(1) is None and owners.owner(question + 1) is None
    memories = [5, 1, 11, 99]
    asked = asked_of(owners, memories)
    assert sorted(asked) == sorted(q for q, m in expected.items() if m in memories)
    assert len(asked) == len(set(asked))
    assert asked_of(owners, []) == [] and asked_of(owners, [99]) == []
    pairs = owners.asked_by(memories)
    assert sorted(pairs) == sorted((q, m) for q, m in expected.items() if m in memories)


def asked_of(owners: QuestionOwners, memory_ids: list[int]) -> list[int]:
    """The question ids of ``memory_ids``."""
    return [question_id for question_id, _ in owners.asked_by(memory_ids)]


def test_a_large_first_read_is_learnt_at_once() -> None:
    owners = QuestionOwners()
    owners.learn((q, q // 6) for q in range(1, 200_001))
    assert len(owners) == 200_000 and owners.owner(123_457) == 20_576
    assert asked_of(owners, [20_576]) == [123_456, 123_457, 123_458, 123_459, 123_460, 123_461]
    owners.learn([(200_001, 7), (5, 999)])  # a known question keeps its owner
    assert owners.owner(5) == 0 and asked_of(owners, [7]) == [*range(42, 48), 200_001]
