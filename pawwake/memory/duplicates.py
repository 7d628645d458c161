"""Is a text already remembered? Exact match, then containment, then keyword overlap.

Exact (case and whitespace ignored) uses an index over all active rows. Containment and
Jaccard similarity are computed on the active rows that share at least one index term with the
text (GIN index), newest first and capped, so the check stays fast at 100k memories.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pawwake.database import require_database
from pawwake.db import memories as db
from pawwake.db.memory_rows import TermsRow
from pawwake.db.pool import cursor
from pawwake.search.terms import terms_for

if TYPE_CHECKING:
    from pawwake.memory.faces import MemorySearch

DEFAULT_THRESHOLD = 0.7
CANDIDATE_CAP = 2000
MIN_CONTAINED_CHARS = 4  # a shorter text is inside almost anything; it proves nothing


def normalise(text: str) -> str:
    return "".join(text.split()).lower()


def jaccard(left: set[str], right: set[str]) -> float:
    if not left or not right:
        return 0.0
    return len(left & right) / len(left | right)


def containment(text: str, other: str) -> float:
    """len(shorter)/len(longer) when one normalised text contains the other, else 0."""
    a, b = normalise(text), normalise(other)
    shorter, longer = (a, b) if len(a) <= len(b) else (b, a)
    if len(shorter) < MIN_CONTAINED_CHARS or shorter not in longer:
        return 0.0
    return len(shorter) / len(longer)


def best_match(content: str, terms: list[str], candidates: Sequence[TermsRow],
               threshold: float) -> dict[str, Any]:
    """Pure part of the check: containment first, then the best Jaccard score."""
    contained = [(containment(content, row["content"]), row["id"]) for row in candidates]
    contained = [item for item in contained if item[0] > 0]
    if contained:
        score, matched = max(contained, key=lambda item: (item[0], -item[1]))
        return _answer(True, "containment", matched, score)
    wanted = set(terms)
    scored = [(jaccard(wanted, set(row["search_terms"])), row["id"]) for row in candidates]
    best = max(scored, key=lambda item: (item[0], -item[1]), default=None)
    score = best[0] if best is not None else 0.0
    if best is not None and score >= threshold:
        return _answer(True, "jaccard", best[1], score)
    return _answer(False, None, None, score)


def _answer(duplicate: bool, reason: str | None, matched: int | None, similarity: float
            ) -> dict[str, Any]:
    return {"is_duplicate": duplicate, "reason": reason, "matched_id": matched,
            "similarity": round(similarity, 4)}


async def check_duplicate(search: MemorySearch, content: str,
                          threshold: float = DEFAULT_THRESHOLD) -> dict[str, Any]:
    """``{is_duplicate, reason: exact|containment|jaccard|null, matched_id, similarity}``."""
    [terms] = await terms_for(search.data_dir, [content])
    async with cursor(require_database(search.database).pool) as cur:
        [(_key, exact)] = await db.content_key_matches(cur, [content])
        if exact is not None:
            return _answer(True, "exact", exact, 1.0)
        candidates = await db.rows_sharing_terms(cur, terms, CANDIDATE_CAP) if terms else []
    return best_match(content, terms, candidates, threshold)
