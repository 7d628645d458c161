"""Relevance: the one number the injection floor compares, the same at every store size.

A small logistic model over the evidence one memory gives for one query, none of it depending
on how many other memories are stored:

- ``standing``: how many deviations the memory's cosine stands above the query's background
  in the memory's language (``search.background``); None without a cosine;
- ``keyword``: the share of the query's keywords the memory holds, each weighted by how
  specific it is in its language (a name counts more than "最近"), a keyword counting as found
  through the other language's terms too (``text.lexicon``) and through the keywords and
  questions a memory model wrote for the memory;
- ``question``: how many deviations the best of the questions the memory model wrote for the
  memory (each with its own vector, ``memory.search.questions``) stands above the query's
  background on the same fixed reference set; it adds ``question`` per deviation past
  ``question_from`` (a question worded like the user's says more than the memory's own words,
  and one barely above the background says nothing); None without a question vector, so a
  store without a memory model is judged as before;
- ``cross``: query and memory are in different languages. The models see little across
  languages (from Chinese, the local model ranks the right English memory in its top five for
  0.05 of the dev set's questions), so there the keyword evidence carries more.

``relevance = logistic(s * standing + k * keyword [+ c * keyword when cross]
+ q * max(0, question - question_from) - offset
- many(store size))``, with ``Relevance``'s coefficients, chosen by the benchmarks. ``bench/relevance_fit.py``
fits it on the dev set, whose near-miss distractors share the true memory's words by design, so
there keywords weigh little (1.2 per deviation, 1.4 for keywords, 0.4 more across languages).
On the natural questions (``bench/retrieval_quality.py``: questions worded as a user would ask
them, at every store size) those weights inject 0.45 of the questions' memories at floor 0.5
(0.63 at 0.1, with 0.6 memories per unrelated chat); these inject 0.82 with at most 0.25 per
unrelated chat up to 100 memories. The offset puts the default floor (0.5) where an unrelated
chat brings at most about 0.3 memories at every size, with the memory model's keywords and
questions too (they give unrelated chats more words to meet: at offset 6.8, 0.62 memories per
unrelated chat at 1,000 memories; at 7.4, at most 0.22 at every size, with 0.94 to 0.98 of
the questions' memories injected and every language pair at 0.92 or more, the frontier of
``bench/retrieval_quality.py``). The offset holds as it is at ``many_from`` (100) memories;
the evidence asked for moves with the store's size as the best of n unrelated memories does
(``many``): about one more deviation of standing at 10,000, and 1.2 fewer at 5 (from
``few`` memories down it stays there), so what an unrelated chat brings stays the same
whatever the size. (Held flat below 100, the bar asked a new user's handful of memories as
much as a hundred unrelated ones could give: without a memory model 0.80 of the questions'
memories were injected at 5 memories, 0.92 with the bar lowered, for 0.01 memories per
unrelated chat either way; with one, 0.98 and 1.00, 0.01 and 0.03.) Without a cosine
(keyword-only search, or a memory not yet embedded) keyword evidence alone decides: 0.3 of the
query's keyword weight held (a name in a longer question) reaches 0.5, so one floor serves
both; below ``many_from`` that bar stays flat (keywords were not measured there).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Relevance:
    """The model's coefficients. ``CALIBRATED`` is the product's; a benchmark passes others
    down the search (``search_memories(..., judging=)``) to compare, changing nothing global."""

    standing: float = 1.4  # per deviation above the background
    keyword: float = 5.0  # for all of the query's keywords found
    cross_keyword: float = 2.0  # added when the memory is in the other language
    # 7.4, not 7.2: unrelated chats at <= 0.25 memories at every size with the memory model's
    # questions (0.44 at 1,000 at 7.2) for the same >= 0.92 injected; with each written
    # question in its own language, 0.22 at most and >= 0.94 (tests/data/retrieval/README.md)
    offset: float = 7.4
    keyword_only: float = 8.5
    keyword_only_offset: float = 2.5
    many_from: int = 100  # store size at which the offset holds as it is (see ``many``)
    few: int = 5  # the smallest store measured: a smaller one is asked what this one is
    question: float = 1.0  # per deviation the best written question stands past ...
    question_from: float = 3.0  # ... this many deviations above the background (on the
    # frontier; 1.5 past 4.0 injects the same, past 2.0 unrelated chats bring more)

    def of(self, evidence: Evidence) -> float:
        """0..1: the number the injection floor compares."""
        if evidence.standing is None:
            return _logistic(self.keyword_only * evidence.keyword - self.keyword_only_offset
                             - max(0.0, self.many(evidence.store_size)))
        keyword = self.keyword + (self.cross_keyword if evidence.cross else 0.0)
        asked = (0.0 if evidence.question is None
                 else self.question * max(0.0, evidence.question - self.question_from))
        return _logistic(self.standing * evidence.standing + keyword * evidence.keyword
                         + asked - self.offset - self.many(evidence.store_size))

    def many(self, store_size: int) -> float:
        """What a store of ``store_size`` memories asks more than one of ``many_from`` (less
        when smaller), so an unrelated chat brings as few memories at 5 as at 10,000: among n
        unrelated memories the best stands about sqrt(2 ln n) deviations above their mean,
        so the evidence asked for moves by that much (from ``few`` memories down, it stays)."""
        size = max(self.few, store_size)
        return self.standing * (math.sqrt(2 * math.log(size))
                                - math.sqrt(2 * math.log(self.many_from)))


CALIBRATED = Relevance()


@dataclass(frozen=True)
class Evidence:
    """What one memory gives for one query (see the module docstring)."""

    standing: float | None
    keyword: float
    cross: bool
    store_size: int = 0  # active memories the query was searched among
    # How far the best question the memory model wrote for the memory stands above the
    # query's background (deviations; None: no question vector)
    question: float | None = None


def _logistic(value: float) -> float:
    if value >= 0:
        return 1.0 / (1.0 + math.exp(-value))
    odds = math.exp(value)
    return odds / (1.0 + odds)
