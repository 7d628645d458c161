"""Which memory each written question belongs to, for the numpy question index: held in
sorted arrays, not in Python dicts.

At 100k memories the model's questions run to several hundred thousand; as dicts (question
id -> memory id, memory id -> its questions) that map took 46-123 MB resident at 2-6
questions a memory, as arrays it takes 20 bytes a question. A question row never changes
owner, so the map only grows: new pairs wait in a small tail (dicts) and are merged into the
arrays once the tail holds ``MERGE_AT`` of them, so a refresh never re-sorts the whole map.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

MERGE_AT = 4096  # pairs kept in the tail before it is merged into the arrays


class QuestionOwners:
    """Question id -> memory id, and each memory's question ids."""

    def __init__(self) -> None:
        self._questions = np.zeros(0, dtype=np.int64)  # sorted question ids
        self._memories = np.zeros(0, dtype=np.int64)  # the owner of each, aligned
        self._by_memory = np.zeros(0, dtype=np.int32)  # positions ordered by owner
        self._owners_sorted = np.zeros(0, dtype=np.int64)  # _memories[_by_memory]
        self._tail: dict[int, int] = {}
        self._tail_asked: dict[int, list[int]] = {}
        self.newest = 0  # the highest question id learnt

    def __len__(self) -> int:
        return len(self._questions) + len(self._tail)

    def learn(self, pairs: Iterable[tuple[int, int]]) -> None:
        """Add ``(question id, memory id)`` pairs (those already known change nothing)."""
        added = np.array(list(pairs), dtype=np.int64).reshape(-1, 2)
        if len(self._questions) and len(added):
            at = np.minimum(np.searchsorted(self._questions, added[:, 0]),
                            len(self._questions) - 1)
            added = added[self._questions[at] != added[:, 0]]
        if not len(added):
            return
        self.newest = max(self.newest, int(added[:, 0].max()))
        if len(added) + len(self._tail) >= MERGE_AT:
            self._merge(added)
            return
        for question_id, memory_id in added.tolist():
            if question_id not in self._tail:
                self._tail[question_id] = memory_id
                self._tail_asked.setdefault(memory_id, []).append(question_id)

    def owner(self, question_id: int) -> int | None:
        """The memory of ``question_id`` (None: not learnt)."""
        found = self._tail.get(question_id)
        return found if found is not None else self._held(question_id)

    def asked_by(self, memory_ids: Sequence[int]) -> list[tuple[int, int]]:
        """``(question id, memory id)`` of every question of ``memory_ids``: a few array
        operations whatever their number (a lookup per question took milliseconds for the
        1,500 questions of 500 keyword candidates)."""
        if not memory_ids:
            return []
        wanted = np.asarray(memory_ids, dtype=np.int64)
        starts = np.searchsorted(self._owners_sorted, wanted, side="left")
        lengths = np.searchsorted(self._owners_sorted, wanted, side="right") - starts
        # every position of each memory's run, the runs one after another
        firsts = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
        positions = firsts + np.arange(int(lengths.sum()))
        found = list(zip(self._questions[self._by_memory[positions]].tolist(),
                         np.repeat(wanted, lengths).tolist(), strict=True))
        if self._tail_asked:
            for memory_id in memory_ids:
                found += [(q, memory_id) for q in self._tail_asked.get(memory_id, [])]
        return found

    def _held(self, question_id: int) -> int | None:
        at = int(np.searchsorted(self._questions, question_id))
        if at < len(self._questions) and int(self._questions[at]) == question_id:
            return int(self._memories[at])
        return None

    def _merge(self, added: np.ndarray) -> None:
        tail = np.array(list(self._tail.items()), dtype=np.int64).reshape(-1, 2)
        questions = np.concatenate([self._questions, tail[:, 0], added[:, 0]])
        memories = np.concatenate([self._memories, tail[:, 1], added[:, 1]])
        questions, first = np.unique(questions, return_index=True)  # sorted, each once
        self._questions, self._memories = questions, memories[first]
        self._by_memory = np.argsort(self._memories, kind="stable").astype(np.int32)
        self._owners_sorted = self._memories[self._by_memory]
        self._tail, self._tail_asked = {}, {}
