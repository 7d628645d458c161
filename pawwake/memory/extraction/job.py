"""Learning memories from conversations: the durable extraction job.

The turn that closes an interval enqueues the job (``conversations/extraction_schedule.py``). The job
reads the last N complete rounds (user and assistant prose only), shows the model the candidate
memories, and applies its answer in one transaction together with the job's completion, so a
crash or a retry never applies an answer twice.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pawwake.db import extraction as db
from pawwake.db.pool import Cursor, cursor, transaction
from pawwake.jobs import Job, RetryLater
from pawwake.llm.models import memory_model
from pawwake.llm.upstream import UpstreamFailure, UpstreamStatusError, UsageBooking, complete
from pawwake.local_time import zone_of
from pawwake.memory.describe import enqueue_describing
from pawwake.memory.embedding_jobs import enqueue_embedding
from pawwake.memory.extraction.parse import (
    ExtractedItem,
    ExtractionAnswerError,
    answer_excerpt,
    parse_answer,
)
from pawwake.memory.extraction.window import bounded_dialogue
from pawwake.memory.model_terms import searchable_text
from pawwake.memory.search import search_memories
from pawwake.priority_worker import BACKGROUND
from pawwake.settings import Settings
from pawwake.text import offload, tokens
from pawwake.text.rounds import dialogue_text, group_rounds

if TYPE_CHECKING:
    from pawwake.memory.faces import MemoryLearning, MemorySearch, MemoryWrites

log = logging.getLogger(__name__)

CANDIDATES_RELATED = 10
CANDIDATES_LATEST = 10
PROMPT = (Path(__file__).with_name("prompts") / "extract.txt").read_text(encoding="utf-8")


def render_prompt(settings: Settings, candidates: list[db.KnownMemory],
                  dialogue: list[tuple[str, str]], now: datetime) -> str:
    local_now = now.astimezone(zone_of(settings))
    hours = settings.TIMEZONE_HOURS
    candidate_lines = "\n".join(
        f"{row['id']}: {row['content']} (layer {row['layer']})" for row in candidates) or "(none)"
    speaker = {"user": "User", "assistant": "Assistant"}
    dialogue_lines = "\n".join(f"{n}. {speaker[role]}: {text}"
                               for n, (role, text) in enumerate(dialogue, 1))
    return (PROMPT.replace("{now}", local_now.isoformat(timespec="minutes"))
            .replace("{offset}", f"{hours:+g}")
            .replace("{candidates}", candidate_lines)
            .replace("{dialogue}", dialogue_lines))


async def candidate_memories(cur: Cursor, query_text: str,
                             similar_ids: list[int] | None = None) -> list[db.KnownMemory]:
    """Top related plus latest active memories, read-only (no access times touched).

    ``similar_ids``: the related memories as hybrid search ranked them (when vectors are on);
    otherwise the rows sharing the most keyword terms."""
    if similar_ids is not None:
        related = await db.active_by_ids(cur, similar_ids)
    else:
        terms = await offload.query_keywords(query_text, top_k=20, priority=BACKGROUND)
        related = await db.related_active(cur, terms, CANDIDATES_RELATED)
    latest = await db.latest_active(cur, CANDIDATES_LATEST)
    merged = {row["id"]: row for row in related + latest}
    return list(merged.values())


async def similar_memory_ids(search: MemorySearch, settings: Settings, query_text: str
                             ) -> list[int] | None:
    """The related memories by hybrid search (the same admission and fusion as recall), or
    None when vectors are off or could not be used (then keywords decide)."""
    if not settings.MEMORY_VECTOR_ENABLED:
        return None
    outcome = await search_memories(search, query_text, limit=CANDIDATES_RELATED,
                                    settings=settings, touch=False, priority=BACKGROUND)
    return [r.id for r in outcome.results] if outcome.mode == "hybrid" else None


async def run_extraction(learning: MemoryLearning, job: Job) -> dict[str, Any]:
    """The durable job: read the window, ask the model, apply the answer atomically."""
    database = job.database
    settings = await learning.config.fresh()
    session_id = job.payload["session_id"]
    upto = int(job.payload["rounds"])
    if not settings.MEMORY_ENABLED or settings.MEMORY_EXTRACT_INTERVAL <= 0:
        return {"skipped": "memory extraction is off"}
    await asyncio.get_running_loop().run_in_executor(None, tokens.load,
                                                     settings.PAWWAKE_DATA_DIR)
    window_size = settings.MEMORY_EXTRACT_INTERVAL
    async with cursor(database.pool) as cur:
        history = await db.session_history(cur, session_id)
    complete_rounds = [r for r in group_rounds(history) if r.complete][:upto]
    window = complete_rounds[-window_size:]
    dialogue = bounded_dialogue(dialogue_text(window))
    if not dialogue:
        return {"skipped": "nothing to read"}
    query_text = "\n".join(t for _, t in dialogue)
    similar = await similar_memory_ids(learning.search, settings, query_text)
    async with cursor(database.pool) as cur:
        candidates = await candidate_memories(cur, query_text, similar)
    message_ids = [m["id"] for r in window for m in r.messages if "id" in m]
    model = memory_model(settings)
    job.model = model
    prompt = render_prompt(settings, candidates, dialogue, datetime.now(UTC))
    try:
        answer = await complete(learning.http.session, settings, [{"role": "user", "content": prompt}],
                                model=model, max_tokens=settings.MEMORY_MAX_TOKENS,
                                temperature=0.2, attempts=1,
                                usage=UsageBooking(database.pool, "extract", session_id,
                                                   health=learning.upstream_health))
    except UpstreamStatusError as exc:
        if exc.status == 429:
            raise RetryLater.rate_limited(f"memory model {model} rate limited (429)",
                                          exc.retry_after) from None
        raise RetryLater(f"memory model {model} answered {exc.status}") from None
    except UpstreamFailure as exc:
        raise RetryLater(f"memory model {model} unreachable: {type(exc).__name__}") from None
    if answer.truncated:
        raise RetryLater(f"memory model {model} answer was truncated (raise MEMORY_MAX_TOKENS)")
    try:
        items = parse_answer(answer.text)
    except ExtractionAnswerError as exc:
        log.warning("extraction job %s: memory model %s gave an unusable answer (%s): %r",
                    job.id, model, exc, answer_excerpt(answer.text))
        raise RetryLater(f"memory model {model} answer unusable: {exc}") from None
    result = await apply_items(learning.writes, job, session_id, items,
                               {c["id"] for c in candidates},
                               message_ids)
    if result["added"]:
        learning.writes.jobs.wake()
    return result


async def apply_items(writes: MemoryWrites, job: Job, session_id: str, items: list[ExtractedItem],
                      candidate_ids: set[int], message_ids: list[int]) -> dict[str, Any]:
    """Write every item and the job's completion in one transaction."""
    database = job.database
    counts = {"added": 0, "duplicates": 0, "superseded": 0, "refused_supersede": 0,
              "reminders_moved": 0}
    # Cut before the transaction opens: one trip to the tokenizer thread, no row locks held
    # while it serves other work.
    item_terms = await offload.index_terms([
        searchable_text(item.content, item.terms.keywords, item.terms.questions)
        for item in items])
    async with transaction(database.pool) as cur:
        # The session's write lock orders this with a purge (which takes it too): a
        # conversation deleted while the model was thinking teaches nothing.
        if not await db.window_still_live(cur, session_id, message_ids):
            skipped = {"skipped": "the conversation was deleted meanwhile", "added": 0}
            if not await db.complete_job(cur, job.id, job.attempts, skipped):
                raise RetryLater("extraction was taken over by another run", delay=0,
                                 count_attempt=False)
            log.info("extraction for a session skipped: deleted while the model answered")
            return skipped
        for item, terms in zip(items, item_terms, strict=True):
            await _apply_item(cur, item, terms, session_id, candidate_ids, message_ids, counts)
        if counts["added"]:
            await enqueue_embedding(cur)
            # An item the model wrote no keywords or questions for is described later.
            if not all(item.terms.keywords or item.terms.questions for item in items):
                await enqueue_describing(cur, writes.config.current())
        if not await db.complete_job(cur, job.id, job.attempts, counts):
            raise RetryLater("extraction was taken over by another run", delay=0,
                             count_attempt=False)
    log.info("extraction for a session: %s", counts)
    return counts


async def _apply_item(cur: Cursor, item: ExtractedItem, terms: list[str], session_id: str,
                      candidate_ids: set[int], message_ids: list[int],
                      counts: dict[str, int]) -> None:
    candidate = None
    if item.candidate_id is not None and item.candidate_id in candidate_ids:
        candidate = await db.lock_memory(cur, item.candidate_id)
    if item.action == "duplicate" and candidate is not None:
        counts["duplicates"] += 1
        if item.remind_at is not None and candidate["is_active"] and (
                candidate["remind_at"] is None or candidate["reminder_delivered_at"]):
            await db.move_reminder(cur, candidate["id"], item.remind_at)
            counts["reminders_moved"] += 1
        return
    new_id = await db.insert_extracted(
        cur, content=item.content, importance=item.importance,
        terms=terms, session_id=session_id,
        message_ids=message_ids, remind_at=item.remind_at, keywords=item.terms.keywords,
        questions=item.terms.questions)
    counts["added"] += 1
    if item.action != "supersede":
        return
    if (candidate is not None and candidate["is_active"] and candidate["superseded_by"] is None
            and candidate["layer"] == 1):
        await db.supersede(cur, candidate["id"], new_id)
        counts["superseded"] += 1
    else:
        # Events and core memories are never replaced automatically; nor is anything outside
        # the candidates the model was shown. The new fact stays as its own fragment.
        counts["refused_supersede"] += 1
        log.info("refused an automatic supersede (candidate not a replaceable fragment)")

