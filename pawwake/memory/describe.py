"""The "memory_describe" job: the memory model writes keywords and questions, in both
languages, for memories that came without them (added through the API or the dashboard,
imported without scoring, merged, restored, or stored before the model wrote any).

Extraction and scored imports ask for them in the same call that makes the memory
(``model_terms``); this job covers the rest, so what a memory is found by does not depend on
how it was written. Batches of ``BATCH`` memories, one model call each, committed per batch:
an interrupted run loses at most one batch. An answer the job cannot use marks its memories
described with nothing written (found by their content alone, as before) so they are not
asked about again; an unreachable model makes the job retry later. Questions written ask for
their vectors (``memory_embed``) in the batch's transaction.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pawwake.database import connected_database, require_database
from pawwake.db import describe as db
from pawwake.db.jobs import enqueue
from pawwake.db.pool import Cursor, cursor, transaction
from pawwake.jobs import Job, RetryLater
from pawwake.llm.models import memory_model
from pawwake.llm.upstream import UpstreamFailure, UpstreamStatusError, UsageBooking, complete
from pawwake.memory.embedding_jobs import enqueue_embedding
from pawwake.memory.model_terms import ModelTerms, searchable_text
from pawwake.search.terms import terms_for
from pawwake.settings import Settings
from pawwake.text.messages import ChatMessage
from pawwake.text.model_json import AnswerNotJson, json_in_answer

if TYPE_CHECKING:
    from pawwake.memory.faces import MemoryLearning, MemoryWrites

log = logging.getLogger(__name__)

KIND = "memory_describe"
BATCH = 20
_PROMPT = (Path(__file__).with_name("prompts") / "describe.txt").read_text("utf-8")


def describing(settings: Settings) -> bool:
    """Whether the memory model is asked to describe memories that came without terms."""
    return bool(settings.MEMORY_ENABLED and settings.MEMORY_DESCRIBE)


async def enqueue_describing(cur: Cursor, settings: Settings) -> None:
    """Ask for descriptions inside the caller's transaction (wake the runner after it)."""
    if describing(settings):
        await enqueue(cur, KIND, {}, dedupe_key="pending")


async def request_describing(writes: MemoryWrites, settings: Settings) -> None:
    """Call after memories without the model's terms were added or their text changed. At
    most one unfinished job exists and it describes every such memory."""
    database = connected_database(writes.database)
    if database is None or not describing(settings):
        return
    async with cursor(database.pool) as cur:
        await enqueue_describing(cur, settings)
    writes.jobs.wake()


def described_now(written: ModelTerms) -> datetime | None:
    """``described_at`` for a memory stored with what the model wrote in the same call: now
    when it wrote something, else None (the describe job asks again)."""
    return datetime.now(UTC) if written.keywords or written.questions else None


def describe_messages(lines: list[str]) -> list[ChatMessage]:
    numbered = "\n".join(f"{number}. {' '.join(line.split())}"
                         for number, line in enumerate(lines, 1))
    return [{"role": "system", "content": _PROMPT.replace("{count}", str(len(lines)))},
            {"role": "user", "content": numbered}]


def parse_descriptions(answer: str, count: int) -> list[ModelTerms] | None:
    """One ``ModelTerms`` per line from the model's JSON array, or None when the answer is
    not an array of ``count`` items (an item that is not an object describes nothing)."""
    try:
        values = json_in_answer(answer, "[")
    except AnswerNotJson:
        return None
    if not isinstance(values, list) or len(values) != count:
        return None
    return [ModelTerms.of(item) for item in values]


async def describe_memories(learning: MemoryLearning, job: Job) -> dict[str, Any]:
    """Job handler: describe every active memory the model has not described yet."""
    settings = await learning.config.fresh()
    if not describing(settings):
        return {"skipped": "memory descriptions are off (MEMORY_DESCRIBE or MEMORY_ENABLED)"}
    pool = job.database.pool
    model = memory_model(settings)
    job.model = model
    after, counts, asked = 0, {"described": 0, "unusable": 0}, False
    while True:
        async with cursor(pool) as cur:
            rows = await db.undescribed(cur, after, BATCH)
        if not rows:
            if asked:
                learning.writes.jobs.wake()
            return counts
        after = rows[-1]["id"]
        contents = [str(row["content"]) for row in rows]
        written = await _ask(learning, settings, model, contents)
        if written is None:
            counts["unusable"] += len(rows)
            written = [ModelTerms()] * len(rows)
        terms = await terms_for(learning.writes.data_dir, [
            searchable_text(text, made.keywords, made.questions)
            for text, made in zip(contents, written, strict=True)])
        async with transaction(pool) as cur:
            counts["described"] += await db.store_descriptions(cur, [
                (row["id"], text, made.keywords, made.questions, cut)
                for row, text, made, cut in zip(rows, contents, written, terms, strict=True)])
            if any(made.questions for made in written):
                await enqueue_embedding(cur)  # the questions' vectors
                asked = True


async def _ask(learning: MemoryLearning, settings: Settings, model: str, lines: list[str]
               ) -> list[ModelTerms] | None:
    """The model's terms per line, or None when its answer is unusable (logged)."""
    try:
        answer = await complete(learning.http.session, settings, describe_messages(lines), model=model,
                                max_tokens=settings.MEMORY_MAX_TOKENS, temperature=0,
                                attempts=1,
                                usage=UsageBooking(require_database(learning.writes.database).pool,
                                                   "extract", health=learning.upstream_health))
    except UpstreamStatusError as exc:
        if exc.status == 429:
            raise RetryLater("memory model rate limited (429)", delay=30,
                             count_attempt=False) from None
        raise RetryLater(f"memory model {model} answered {exc.status}") from None
    except UpstreamFailure as exc:
        raise RetryLater(f"memory model {model} unreachable: {type(exc).__name__}") from None
    written = None if answer.truncated else parse_descriptions(answer.text, len(lines))
    if written is None:
        log.warning("memory descriptions: model %s gave no usable answer for %d memories"
                    " (%s)", model, len(lines), "cut off" if answer.truncated else "not an"
                    " array of objects")
    return written
