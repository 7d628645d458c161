"""Every kind of durable background job and the handler that runs it, in one place.

Registered once when the app is built, so whether a job ever runs never depends on which
route modules or resources happened to be set up. A handler is called with the app's services
and the job; it reads the settings once, at its start.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

from pawwake.chat import extraction_schedule
from pawwake.chat.recall import index as conversation_index
from pawwake.jobs import Job
from pawwake.memory import describe, embedding_jobs, embedding_worker, reindex
from pawwake.memory.consolidation import drafts as consolidate
from pawwake.memory.consolidation.parse import CONSOLIDATE_KIND
from pawwake.memory.extraction import job as extract
from pawwake.services import Services

HANDLERS: dict[str, Callable[[Services, Job], Awaitable[Any]]] = {
    extraction_schedule.EXTRACT_KIND: extract.run_extraction,  # learn memories from stored turns
    CONSOLIDATE_KIND: consolidate.run_draft_job,  # group memories into event drafts
    embedding_jobs.EMBED_KIND: embedding_worker.embed_missing_memories,  # memory vectors
    conversation_index.EMBED_KIND: conversation_index.embed_missing_messages,  # message vectors
    describe.KIND: describe.describe_memories,  # the memory model's keywords and questions
    reindex.KIND: reindex.reindex_job,  # re-tokenise stored rows after a keyword-rule change
}


def register_job_handlers(services: Services) -> None:
    for kind, handler in HANDLERS.items():
        services.jobs.register(kind, functools.partial(handler, services))
