"""Every kind of durable background job and the handler that runs it, in one place.

Registered once when the app is built, so whether a job ever runs never depends on which
route modules or resources happened to be set up. A handler is called with the face it
declares (what it works with, built in ``services.py``) and the job; it reads the settings
once, at its start.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from pawwake.conversations import extraction_schedule
from pawwake.jobs import Job
from pawwake.memory import describe, embedding_jobs, embedding_worker, reindex
from pawwake.memory.consolidation import drafts as consolidate
from pawwake.memory.consolidation.parse import CONSOLIDATE_KIND
from pawwake.memory.extraction import job as extract
from pawwake.memory.faces import MemoryEmbedding, MemoryLearning, MemoryWrites
from pawwake.recall import index as conversation_index
from pawwake.recall.faces import ConversationRecall

Handler = Callable[[Job], Awaitable[Any]]


def job_handlers(*, learning: MemoryLearning, writes: MemoryWrites, embedding: MemoryEmbedding,
                 recall: ConversationRecall) -> dict[str, Handler]:
    """Each kind and its handler, bound to its face."""
    return {
        # learn memories from stored turns
        extraction_schedule.EXTRACT_KIND: partial(extract.run_extraction, learning),
        # group memories into event drafts
        CONSOLIDATE_KIND: partial(consolidate.run_draft_job, learning),
        # memory vectors
        embedding_jobs.EMBED_KIND: partial(embedding_worker.embed_missing_memories, embedding),
        # message vectors
        conversation_index.EMBED_KIND: partial(conversation_index.embed_missing_messages, recall),
        # the memory model's keywords and questions
        describe.KIND: partial(describe.describe_memories, learning),
        # re-tokenise stored rows after a keyword-rule change
        reindex.KIND: partial(reindex.reindex_job, writes),
    }
