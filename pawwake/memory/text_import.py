"""Plain-text import: one memory per line, exact duplicates skipped, importance scored by the
memory model in batches (or 5 when scoring is skipped or fails).

Model calls happen before the write; every new row is then inserted in one transaction.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pawwake.database import require_database
from pawwake.db import memories as db
from pawwake.db.memory_rows import NewMemory
from pawwake.db.pool import cursor, transaction
from pawwake.llm import upstream
from pawwake.llm.models import memory_model
from pawwake.memory import fresh_vectors
from pawwake.memory.describe import described_now, enqueue_describing
from pawwake.memory.embedding_jobs import enqueue_embedding
from pawwake.memory.extraction.parse import answer_excerpt
from pawwake.memory.fields import MAX_CONTENT_CHARS, FieldError
from pawwake.memory.model_terms import ModelTerms, searchable_text
from pawwake.search.terms import terms_for
from pawwake.settings import Settings
from pawwake.text.messages import ChatMessage
from pawwake.text.storable import storable_text

if TYPE_CHECKING:
    from pawwake.memory.faces import MemoryLearning
    from pawwake.settings import Settings

log = logging.getLogger(__name__)

SCORE_BATCH = 20
DEFAULT_IMPORTANCE = 5
MAX_LINES = 10_000
_PROMPT = (Path(__file__).with_name("prompts") / "score_importance.txt").read_text("utf-8")
_FENCE = re.compile(r"^\s*```(?:json)?\s*|\s*```\s*$", re.IGNORECASE)


class LineTooLong(FieldError):
    """One line (one memory to be) is longer than a memory may be."""

    def __init__(self, line: int) -> None:
        super().__init__("text", f"Line {line} (not counting empty lines) is longer than "
                         f"{MAX_CONTENT_CHARS} characters, the most a memory holds.",
                         "line_too_long")
        self.line = line


def split_lines(text: str) -> list[str]:
    """Non-empty lines, trimmed; a leading byte-order mark is ignored."""
    return [line.strip() for line in text.lstrip("\ufeff").splitlines() if line.strip()]


def parse_scores(answer: str, count: int) -> list[tuple[int, ModelTerms]] | None:
    """The model's JSON array of ``count`` items, each ``{"importance", "keywords",
    "questions"}`` or a bare integer (importance clamped to 1..10; keywords and questions
    kept only when usable, see ``ModelTerms``), or None when it is not exactly that."""
    body = _FENCE.sub("", answer.strip())
    start, end = body.find("["), body.rfind("]")
    if start < 0 or end <= start:
        return None
    try:
        values = json.loads(body[start:end + 1])
    except ValueError:
        return None
    if not isinstance(values, list) or len(values) != count:
        return None
    scores = []
    for item in values:
        value = item.get("importance") if isinstance(item, dict) else item
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            return None
        scores.append((min(10, max(1, value)), ModelTerms.of(item)))
    return scores


def scoring_messages(lines: list[str]) -> list[ChatMessage]:
    numbered = "\n".join(f"{number}. {line}" for number, line in enumerate(lines, 1))
    return [{"role": "system", "content": _PROMPT.replace("{count}", str(len(lines)))},
            {"role": "user", "content": numbered}]


# Why a batch fell back to the default importance: the code travels to the dashboard (which
# words it in the reader's language), the English text to the API and the log.
SCORING_PROBLEMS = {
    "scoring_unavailable": "the scoring model could not be used ({error}, {status})",
    "scoring_truncated": "the scoring answer was cut off at the output limit",
    "scoring_not_array": "the scoring answer was not a JSON array of {count} scores",
}


async def score_lines(learning: MemoryLearning, settings: Settings, lines: list[str]
                      ) -> tuple[list[tuple[int, ModelTerms]], list[bool], list[dict[str, Any]]]:
    """Score per line, whether the model gave it, and a notice for each batch that fell back
    (``{code, first, last, importance, ...}``; ``english_warning`` words it)."""
    model = memory_model(settings)
    scores: list[tuple[int, ModelTerms]] = []
    by_model: list[bool] = []
    notices: list[dict[str, Any]] = []
    for start in range(0, len(lines), SCORE_BATCH):
        batch = lines[start:start + SCORE_BATCH]
        result, problem = await _score_batch(learning, settings, model, batch)
        if result is None:
            notice = {**problem, "first": start + 1, "last": start + len(batch),
                      "importance": DEFAULT_IMPORTANCE}
            notices.append(notice)
            log.warning("importance scoring failed: %s", english_warning(notice))
            scores.extend([(DEFAULT_IMPORTANCE, ModelTerms())] * len(batch))
            by_model.extend([False] * len(batch))
        else:
            scores.extend(result)
            by_model.extend([True] * len(batch))
    return scores, by_model, notices


def english_warning(notice: dict[str, Any]) -> str:
    problem = SCORING_PROBLEMS[notice["code"]].format(**notice)
    return (f"lines {notice['first']}-{notice['last']}: {problem};"
            f" importance {notice['importance']} used.")


async def _score_batch(learning: MemoryLearning, settings: Settings, model: str, batch: list[str]
                       ) -> tuple[list[tuple[int, ModelTerms]] | None, dict[str, Any]]:
    try:
        reply = await upstream.complete(learning.http.session, settings, scoring_messages(batch),
                                        model=model, max_tokens=settings.MEMORY_MAX_TOKENS,
                                        temperature=0,
                                        usage=upstream.UsageBooking(
                                            require_database(learning.writes.database).pool, "extract",
                                            health=learning.upstream_health))
    except upstream.UpstreamFailure as exc:
        return None, {"code": "scoring_unavailable", "error": exc.code, "status": exc.status}
    if reply.truncated:
        return None, {"code": "scoring_truncated"}
    result = parse_scores(reply.text, len(batch))
    if result is None:
        log.warning("import scoring: model %s did not answer %s integers: %r", model,
                    len(batch), answer_excerpt(reply.text))
        return None, {"code": "scoring_not_array", "count": len(batch)}
    return result, {}


async def import_text(learning: MemoryLearning, text: str, *, skip_scoring: bool,
                      settings: Settings) -> dict[str, Any]:
    """Import each new line as a fragment; report ``{imported, skipped, scored, warnings,
    notices}``: ``warnings`` in English, ``notices`` the same as codes with their values."""
    lines = split_lines(storable_text(text))
    if len(lines) > MAX_LINES:
        raise FieldError("text", f"At most {MAX_LINES} lines per import; split the file.",
                         "too_many_lines")
    for number, line in enumerate(lines, 1):
        if len(line) > MAX_CONTENT_CHARS:
            raise LineTooLong(number)
    pool = require_database(learning.writes.database).pool
    async with cursor(pool) as cur:
        fresh = _new_lines(lines, await db.content_key_matches(cur, lines)) if lines else []
    notices: list[dict[str, Any]]
    if skip_scoring or not fresh:
        scores = [(DEFAULT_IMPORTANCE, ModelTerms())] * len(fresh)
        by_model, notices = [False] * len(fresh), []
    else:
        scores, by_model, notices = await score_lines(learning, settings, fresh)
    terms = await terms_for(learning.writes.data_dir, [
        searchable_text(line, written.keywords, written.questions)
        for line, (_, written) in zip(fresh, scores, strict=True)])
    async with transaction(pool) as cur:
        await db.lock_memory_imports(cur)
        # Another import may have added some of these lines while the model was scoring.
        still_new = set(_new_lines(fresh, await db.content_key_matches(cur, fresh))) if fresh \
            else set()
        rows: list[NewMemory] = []
        scored = 0
        for line, (score, written), modelled, line_terms in zip(fresh, scores, by_model, terms,
                                                                strict=True):
            if line in still_new:
                rows.append({"content": line, "importance": score, "layer": 1,
                             "search_terms": line_terms, "model_keywords": written.keywords,
                             "model_questions": written.questions,
                             "described_at": described_now(written)})
                scored += modelled
        inserted = await db.insert_memories(cur, rows)
        if inserted:
            await enqueue_embedding(
                cur, delay_seconds=fresh_vectors.job_delay(settings, len(inserted)))
        if any(row["described_at"] is None for row in rows):
            await enqueue_describing(cur, settings)
    await fresh_vectors.embed_written(learning.writes, inserted)
    if inserted:
        learning.writes.jobs.wake()
    log.info("text import: %s imported, %s skipped", len(inserted), len(lines) - len(inserted))
    return {"imported": len(inserted), "skipped": len(lines) - len(inserted),
            "scored": scored, "warnings": [english_warning(n) for n in notices],
            "notices": notices}


def _new_lines(lines: list[str], matches: list[tuple[str, int | None]]) -> list[str]:
    """Lines that match no active memory and no earlier line of the same file."""
    seen: set[str] = set()
    fresh = []
    for line, (key, existing) in zip(lines, matches, strict=True):
        if existing is None and key not in seen:
            fresh.append(line)
        seen.add(key)
    return fresh
