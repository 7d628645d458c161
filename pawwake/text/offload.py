"""Tokenising off the event loop: every caller on the loop cuts text through here.

Cutting runs on one worker thread (jieba is used from one thread only, and a single thread
bounds how much the work competes with the event loop for the interpreter lock). A chat's query
keywords go ahead of background indexing; background texts are cut in groups of bounded size,
submitted one group at a time, so a chat waits for at most one group already being cut.
Texts that arrive together (one turn) can share a budget, so one request's cutting stays short.
"""

from __future__ import annotations

from collections.abc import Sequence

from pawwake.priority_worker import BACKGROUND, CHAT, PriorityWorker
from pawwake.text import tokens

GROUP_CHARS = tokens.INDEX_HEAD_CHARS + tokens.INDEX_TAIL_CHARS  # about 80 ms of cutting
MIN_SHARE = 1000

_worker = PriorityWorker("tokenizer")


def _terms_of(texts: list[str]) -> list[list[str]]:
    return [tokens.index_terms(text) if text.strip() else [] for text in texts]


def _groups(texts: Sequence[str]) -> list[list[str]]:
    """Consecutive texts whose bounded lengths add up to about GROUP_CHARS (a long text alone)."""
    groups: list[list[str]] = []
    size = 0
    for text in texts:
        length = min(len(text), GROUP_CHARS)
        if not groups or size + length > GROUP_CHARS:
            groups.append([])
            size = 0
        groups[-1].append(text)
        size += length
    return groups


def shared_bound(texts: Sequence[str], budget: int) -> list[str]:
    """``texts`` cut so that together they hold about ``budget`` characters: when their bounded
    lengths add up to more, each long one keeps an equal share (at least ``MIN_SHARE``) of its
    head and tail."""
    full = sum(min(len(text), GROUP_CHARS) for text in texts)
    if full <= budget:
        return list(texts)
    share = max(MIN_SHARE, budget // max(1, len(texts)))
    head = share * 3 // 4
    return [tokens.bounded(text, head, share - head) for text in texts]


async def index_terms(texts: Sequence[str], *, priority: int = BACKGROUND,
                      budget: int | None = None) -> list[list[str]]:
    """Index terms of each text (see ``tokens.index_terms``), cut on the worker thread.
    With ``budget``, the texts share that many characters (see ``shared_bound``)."""
    if budget is not None:
        texts = shared_bound(texts, budget)
    terms: list[list[str]] = []
    for group in _groups(texts):
        terms.extend(await _worker.run(priority, _terms_of, group))
    return terms


async def query_keywords(text: str, top_k: int = 10, *, priority: int = CHAT) -> list[str]:
    """A search query's keywords (see ``tokens.query_keywords``), ahead of background cutting."""
    return await _worker.run(priority, tokens.query_keywords, text, top_k)


async def keywords_and_runs(text: str, *, priority: int = CHAT
                            ) -> tuple[list[str], list[str]]:
    """A query's keywords and its runs of single Chinese characters
    (``tokens.keywords_and_runs``), in one trip to the worker."""
    return await _worker.run(priority, tokens.keywords_and_runs, text)
