"""Re-tokenising stored rows after the keyword rules change (the job that migrations 0013 and
0017 enqueue).

Memories, then conversation messages that have terms (messages without terms are left to
``conversation_index.index_pending``), are read in id order in batches, cut in a worker
thread and written back only where the content is still the one that was cut, so an edit made
meanwhile (which stores terms of its own) is never overwritten. The last id done is kept as
the job's progress: a restarted job resumes there, and running it twice changes nothing.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from pawwake.db import jobs as jobs_db
from pawwake.db import reindex as reindex_db
from pawwake.db.pool import cursor
from pawwake.jobs import Job
from pawwake.memory.model_terms import searchable_text
from pawwake.search.terms import terms_for

if TYPE_CHECKING:
    from pawwake.memory.faces import MemoryWrites

log = logging.getLogger(__name__)

KIND = "keyword_reindex"
BATCH = 500
TABLES = ("memories", "conversations")


async def reindex_job(writes: MemoryWrites, job: Job) -> dict[str, Any]:
    """Job handler: see the module docstring."""
    database = job.database
    async with cursor(database.pool) as cur:
        stored = await jobs_db.get_job(cur, job.id)
    progress = dict(stored["progress"] if stored else {})
    for table in TABLES:
        after = int(progress.get(table, 0))
        while True:
            async with cursor(database.pool) as cur:
                rows = await reindex_db.rows_after(cur, table, after, BATCH)
            if not rows:
                break
            terms = await terms_for(writes.data_dir, [
                searchable_text(row["content"], row.get("written") or ())
                for row in rows])
            async with cursor(database.pool) as cur:
                await reindex_db.store_terms(cur, table, [
                    (row["id"], row["content"], t) for row, t in zip(rows, terms, strict=True)])
            after = rows[-1]["id"]
            progress[table] = after
            progress[f"{table}_done"] = int(progress.get(f"{table}_done", 0)) + len(rows)
            await job.progress(**progress)
            await job.keep_alive()
    log.info("keyword index rebuilt: %s memories, %s messages",
             progress.get("memories_done", 0), progress.get("conversations_done", 0))
    return {"memories": progress.get("memories_done", 0),
            "conversations": progress.get("conversations_done", 0)}

