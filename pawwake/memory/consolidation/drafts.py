"""Consolidation drafts: the durable job that asks the model to group memories into events.

One job at a time. A date range is worked one local day at a time; a batch whose prompt is too
long, whose answer was cut at the output cap or does not cover its items exactly once is
halved and asked again; one repair call is spent on an answer that is not JSON. The job only
produces drafts: nothing is written to memories until a draft is confirmed (see merge.py).
A 429 releases the worker and the job resumes later where it stopped.
"""

from __future__ import annotations

import logging
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pawwake.database import require_database
from pawwake.db import consolidation as db
from pawwake.db import jobs as jobs_db
from pawwake.db.consolidation import DatedMemoryRow
from pawwake.db.errors import NotFound
from pawwake.db.memory_rows import MemoryRow
from pawwake.db.pool import cursor
from pawwake.jobs import Job, RetryLater, backoff_seconds
from pawwake.llm.models import memory_model
from pawwake.llm.upstream import (
    Completion,
    UpstreamFailure,
    UpstreamStatusError,
    UsageBooking,
    complete,
)
from pawwake.memory.consolidation import parse
from pawwake.memory.consolidation.merge import DetailedConflict, draft_states
from pawwake.memory.consolidation.parse import CONSOLIDATE_KIND
from pawwake.memory.extraction.parse import answer_excerpt
from pawwake.memory.fields import FieldError

if TYPE_CHECKING:
    from pawwake.database import Database
    from pawwake.memory.faces import MemoryLearning, MemoryWrites
    from pawwake.settings import Settings

log = logging.getLogger(__name__)

PROMPTS = Path(__file__).with_name("prompts")
PROMPT = (PROMPTS / "consolidate.txt").read_text(encoding="utf-8")
REPAIR_PROMPT = (PROMPTS / "json_repair.txt").read_text(encoding="utf-8")

MAX_RANGE_DAYS = 366
MAX_ITEMS = 3000
JOB_ATTEMPTS = 3  # provider outages (5xx, unreachable); 429s are counted apart
MAX_RATE_LIMITS = 6  # 429 waits of 15 s doubling to 5 min: about 13 minutes in all
TEMPERATURE = 0.2


class DraftJobFailed(Exception):
    """An error no retry would fix: the job ends with it and every memory stays as it was."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class _RateLimited(Exception):
    pass


class _ProviderDown(Exception):
    pass


# --- starting, watching, cancelling --------------------------------------------------------

async def start_selection(writes: MemoryWrites, ids: list[int], *, settings: Settings
                          ) -> dict[str, Any]:
    """Queue drafts for chosen memories (any layer): all must exist, be active and have no
    reminder waiting."""
    tz_hours = settings.TIMEZONE_HOURS
    async with cursor(require_database(writes.database).pool) as cur:
        rows = await db.rows_by_ids(cur, ids, tz_hours)
    missing = sorted(set(ids) - {r["id"] for r in rows})
    if missing:
        raise NotFound(f"No memory with id {', '.join(map(str, missing))}.")
    archived = [r["id"] for r in rows if not r["is_active"]]
    if archived:
        raise FieldError("ids", "Only active memories can be consolidated; archived: "
                               f"{_id_list(archived)}.", "memory_archived", ids=archived)
    waiting = [r["id"] for r in rows if _reminder_pending(r)]
    if waiting:
        raise FieldError("ids", "Memories with a reminder that has not been delivered yet "
                               f"cannot be merged: {_id_list(waiting)}.",
                               "memory_has_reminder", ids=waiting)
    payload = {"mode": "selection", "ids": ids, "timezone_hours": tz_hours}
    return await _enqueue(writes, payload, len(ids))


async def start_range(writes: MemoryWrites, date_from: date, date_to: date, *,
                      settings: Settings) -> dict[str, Any]:
    """Queue drafts for active fragments and events whose local date is in the range."""
    if date_to < date_from:
        raise FieldError("date_to", "'date_to' is before 'date_from'.", "invalid_range")
    if (date_to - date_from).days + 1 > MAX_RANGE_DAYS:
        raise FieldError("date_to", f"A range may span at most {MAX_RANGE_DAYS} days.",
                               "range_too_long")
    tz_hours = settings.TIMEZONE_HOURS
    async with cursor(require_database(writes.database).pool) as cur:
        count = await db.count_range(cur, date_from, date_to, tz_hours)
    if count == 0:
        raise FieldError(None, "No active fragment or event without a pending reminder "
                               "falls in that range.", "nothing_to_consolidate")
    if count > MAX_ITEMS:
        raise FieldError(None, f"{count} memories fall in that range; consolidate at most "
                               f"{MAX_ITEMS} at a time (choose a shorter range).",
                               "too_many_memories", count=count)
    payload = {"mode": "range", "date_from": date_from.isoformat(),
               "date_to": date_to.isoformat(), "timezone_hours": tz_hours}
    return await _enqueue(writes, payload, count)


async def _enqueue(writes: MemoryWrites, payload: dict[str, Any], items: int) -> dict[str, Any]:
    pool = require_database(writes.database).pool
    async with cursor(pool) as cur:
        job_id = await jobs_db.enqueue(cur, CONSOLIDATE_KIND, payload, dedupe_key="single",
                                       max_attempts=JOB_ATTEMPTS)
        running = (await jobs_db.unfinished_of_kind(cur, CONSOLIDATE_KIND)
                   if job_id is None else None)
    if job_id is None:
        raise DetailedConflict("consolidation_running", "Drafts are already being made; wait "
                               "for them or cancel that run first.",
                               job_id=running["id"] if running else None)
    writes.jobs.wake()
    log.info("consolidation job %s queued (%s, %s memories)", job_id, payload["mode"], items)
    return {"job_id": job_id, "status": "queued", "mode": payload["mode"], "items": items}


async def cancel(database: Database) -> dict[str, Any]:
    async with cursor(database.pool) as cur:
        cancelled = await db.cancel_unfinished(
            cur, CONSOLIDATE_KIND,
            {"code": "cancelled", "message": "The draft run was cancelled."})
    if not cancelled:
        raise DetailedConflict("not_running", "No draft run is queued or running.")
    return {"cancelled": True, "job_id": cancelled[0]}


async def status(database: Database, job_id: int | None = None) -> dict[str, Any]:
    """The latest (or the named) draft job as a UI shows it; drafts carry their state now."""
    pool = database.pool
    if job_id is None:
        async with cursor(pool) as cur:
            job = await jobs_db.latest_of_kind(cur, CONSOLIDATE_KIND)
        if job is None:
            return {"status": "none", "job_id": None}
    else:
        async with cursor(pool) as cur:
            job = await jobs_db.get_job(cur, job_id)
        if job is None or job["kind"] != CONSOLIDATE_KIND:
            raise NotFound(f"No consolidation run with id {job_id}.")
    payload, result = job["payload"], job["result"] or {}
    shown: dict[str, Any] = {
        "job_id": job["id"], "status": _status_name(job), "mode": payload.get("mode"),
        "request": {k: payload[k] for k in ("ids", "date_from", "date_to") if k in payload},
        "progress": {k: v for k, v in (job["progress"] or {}).items() if k != "resume"},
        "created_at": job["created_at"].isoformat(), "updated_at": job["updated_at"].isoformat(),
    }
    if shown["status"] == "retrying":
        shown["retry_at"] = job["run_after"].isoformat()
        shown["last_error"] = job["last_error"]
    if job["status"] == "done":
        shown["drafts"] = await draft_states(database, result.get("drafts", []))
        shown["stats"] = result.get("stats", {})
    if shown["status"] == "failed":
        shown["error"] = result.get("error") or {
            "code": "job_failed", "message": job["last_error"] or "The draft run failed."}
    return shown


def _status_name(job: jobs_db.JobRow) -> str:
    if job["status"] == "pending":
        return "retrying" if job["attempts"] > 0 or job["last_error"] else "queued"
    if job["status"] in ("dead", "discarded"):  # out of attempts, or given up on: no drafts
        return "failed"
    return str(job["status"])


def _reminder_pending(row: MemoryRow) -> bool:
    return row["remind_at"] is not None and row["reminder_delivered_at"] is None


def _id_list(ids: list[int]) -> str:
    shown = ", ".join(map(str, ids[:20]))
    return shown + (f" and {len(ids) - 20} more" if len(ids) > 20 else "")


# --- the job -------------------------------------------------------------------------------

class DraftRun:
    """One run of the draft job: a queue of batches worked front to back."""

    def __init__(self, learning: MemoryLearning, job: Job, settings: Settings) -> None:
        self.job = job
        self.learning = learning
        self.pool = require_database(learning.writes.database).pool
        self.settings = settings
        self.tz_hours = float(job.payload["timezone_hours"])
        self.model = memory_model(settings)
        job.model = self.model
        self.max_tokens = settings.MEMORY_MAX_TOKENS
        self.rows: dict[int, DatedMemoryRow] = {}
        self.queue: list[dict[str, Any]] = []
        self.drafts: list[dict[str, Any]] = []
        self.stats = {"model_calls": 0, "halvings": 0, "repairs": 0, "rate_limited": 0}
        self.days_total = 0
        self.batches_done = 0

    async def execute(self, resume: dict[str, Any] | None) -> dict[str, Any] | None:
        await self._plan(resume)
        await self._report()
        while self.queue:
            if not await self._still_ours():
                log.info("consolidation job %s was cancelled or taken over", self.job.id)
                return None
            batch = self.queue[0]
            try:
                replacement = await self._work(batch)
            except _RateLimited:
                self.stats["rate_limited"] += 1
                if self.stats["rate_limited"] > MAX_RATE_LIMITS:
                    raise DraftJobFailed("rate_limited", "The memory model kept answering 429 "
                                         "(rate limited); try again later.") from None
                await self._save_for_resume()
                delay = min(300.0, 15.0 * 2 ** (self.stats["rate_limited"] - 1))
                raise RetryLater("memory model rate limited (429)", delay=delay,
                                 count_attempt=False) from None
            except _ProviderDown as exc:
                await self._save_for_resume()
                raise RetryLater(str(exc), delay=backoff_seconds(self.job.attempts)) from None
            self.queue[:1] = replacement
            if not replacement:
                self.batches_done += 1
            await self._report()
            await self.job.keep_alive()
        drafts = [{"draft_id": parse.draft_id(self.job.id, n), **d}
                  for n, d in enumerate(self.drafts, 1)]
        log.info("consolidation job %s made %s drafts from %s memories (%s)", self.job.id,
                 len(drafts), sum(len(d["source_ids"]) for d in drafts), self.stats)
        return {"drafts": drafts, "stats": {**self.stats, "items": len(self.rows),
                                            "days": self.days_total}}

    async def _plan(self, resume: dict[str, Any] | None) -> None:
        payload = self.job.payload
        async with cursor(self.pool) as cur:
            if resume is not None:
                ids = [i for batch in resume["queue"] for i in batch["ids"]]
                rows = await db.rows_by_ids(cur, ids, self.tz_hours)
            elif payload["mode"] == "range":
                rows = await db.range_rows(cur, date.fromisoformat(payload["date_from"]),
                                           date.fromisoformat(payload["date_to"]),
                                           self.tz_hours, MAX_ITEMS)
            else:
                rows = await db.rows_by_ids(cur, payload["ids"], self.tz_hours)
        # Rows archived or given a reminder since the request are left out, not merged.
        self.rows = {r["id"]: r for r in rows if r["is_active"] and not _reminder_pending(r)}
        if resume is not None:
            self.queue, self.drafts = resume["queue"], resume["drafts"]
            self.stats.update(resume["stats"])
            self.days_total, self.batches_done = resume["days_total"], resume["batches_done"]
        elif payload["mode"] == "range":
            self.queue = parse.batches_by_day(list(self.rows.values()), self.tz_hours)
            self.days_total = len(self.queue)
        else:
            if len(self.rows) < 2:
                raise DraftJobFailed("selection_changed", "Fewer than 2 of the selected memories "
                                     "are still active without a pending reminder.")
            self.queue = [parse.selection_batch(list(self.rows.values()), self.tz_hours)]
            self.days_total = 0

    async def _work(self, batch: dict[str, Any]) -> list[dict[str, Any]]:
        """Ask about one batch; returns the batches that replace it (none when it is done)."""
        rows = [self.rows[i] for i in batch["ids"] if i in self.rows]
        if not rows:
            return []
        prompt = parse.render_prompt(PROMPT, rows, self.tz_hours)
        if len(prompt) > parse.PROMPT_CHAR_LIMIT:
            return self._halve(batch, rows, "item_too_long",
                               f"its prompt has {len(prompt)} characters "
                               f"(limit {parse.PROMPT_CHAR_LIMIT})")
        answer = await self._ask(prompt)
        if self._truncated(answer):
            return self._halve(batch, rows, "answer_truncated",
                               "the answer was cut at MEMORY_MAX_TOKENS")
        try:
            raw_groups = parse.parse_groups(answer.text)
        except parse.AnswerUnreadable as first:
            self.stats["repairs"] += 1
            log.warning("consolidation job %s: memory model %s gave an unreadable answer (%s);"
                        " asking for a repair: %r", self.job.id, self.model, first,
                        answer_excerpt(answer.text))
            repaired = await self._ask(parse.render_repair(REPAIR_PROMPT, answer.text))
            try:
                if self._truncated(repaired):
                    raise parse.AnswerUnreadable("the repaired answer was cut off")
                raw_groups = parse.parse_groups(repaired.text)
            except parse.AnswerUnreadable as exc:
                log.warning("consolidation job %s: the repaired answer is unreadable too (%s):"
                            " %r", self.job.id, exc, answer_excerpt(repaired.text))
                return self._halve(batch, rows, "answer_unreadable",
                                   f"the answer was not JSON even after a repair ({exc})")
        try:
            groups = parse.check_coverage(raw_groups, len(rows))
        except parse.CoverageError as exc:
            return self._halve(batch, rows, "answer_incomplete",
                               f"the answer did not cover the items exactly once ({exc})")
        self.drafts.extend(parse.build_draft(g, rows, self.tz_hours, batch["day"])
                           for g in groups)
        return []

    def _halve(self, batch: dict[str, Any], rows: list[DatedMemoryRow], code: str,
               reason: str) -> list[dict[str, Any]]:
        if len(rows) == 1:
            raise DraftJobFailed(code, f"Memory {rows[0]['id']} could not be consolidated: "
                                 f"{reason}.")
        self.stats["halvings"] += 1
        log.info("consolidation batch of %s halved: %s", len(rows), reason)
        return parse.halve({**batch, "ids": [r["id"] for r in rows]})

    def _truncated(self, answer: Completion) -> bool:
        completion = answer.usage.completion if answer.usage is not None else None
        return parse.is_truncated(answer.finish_reason, completion, self.max_tokens)

    async def _ask(self, prompt: str) -> Completion:
        try:
            answer = await complete(self.learning.http.session, self.settings,
                                    [{"role": "user", "content": prompt}], model=self.model,
                                    max_tokens=self.max_tokens, temperature=TEMPERATURE,
                                    attempts=1,
                                    usage=UsageBooking(self.pool, "consolidate",
                                                       health=self.learning.upstream_health))
        except UpstreamStatusError as exc:
            if exc.status == 429:
                raise _RateLimited() from None
            if 400 <= exc.status < 500 and exc.status not in (408, 409):
                raise DraftJobFailed("model_refused", f"The memory model answered {exc.status}; "
                                     "check MEMORY_MODEL and the API settings.") from None
            raise _ProviderDown(f"memory model answered {exc.status}") from None
        except UpstreamFailure as exc:
            raise _ProviderDown(f"memory model unreachable ({exc.code})") from None
        self.stats["model_calls"] += 1
        return answer

    async def _still_ours(self) -> bool:
        async with cursor(self.pool) as cur:
            state = await db.job_state(cur, self.job.id)
        return state == ("running", self.job.attempts)

    def _counts(self) -> dict[str, Any]:
        days_left = {b["day"] for b in self.queue if b["day"] is not None}
        return {"days_total": self.days_total, "days_done": self.days_total - len(days_left),
                "batches_done": self.batches_done,
                "batches_total": self.batches_done + len(self.queue),
                "drafts": len(self.drafts), **self.stats}

    async def _report(self) -> None:
        await self.job.progress(**self._counts())

    async def _save_for_resume(self) -> None:
        """Keep finished drafts and the remaining queue so the retry repeats no model call."""
        resume = {"queue": self.queue, "drafts": self.drafts, "stats": self.stats,
                  "days_total": self.days_total, "batches_done": self.batches_done}
        await self.job.progress(**self._counts(), resume=resume)


async def run_draft_job(learning: MemoryLearning, job: Job) -> dict[str, Any] | None:
    """Job handler for CONSOLIDATE_KIND."""
    settings = await learning.config.fresh()
    pool = require_database(learning.writes.database).pool
    async with cursor(pool) as cur:
        stored = await jobs_db.get_job(cur, job.id)
    resume = stored["progress"].get("resume") if stored else None
    try:
        return await DraftRun(learning, job, settings).execute(resume)
    except DraftJobFailed as exc:
        log.warning("consolidation job %s failed: %s", job.id, exc.message)
        async with cursor(pool) as cur:
            await db.fail_job(cur, job.id, job.attempts, {"code": exc.code, "message": exc.message})
        return None

