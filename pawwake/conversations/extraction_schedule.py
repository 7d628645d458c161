"""When a stored turn enqueues memory extraction: every ``MEMORY_EXTRACT_INTERVAL`` complete rounds.

The round count comes from the stored history, so a restart loses nothing and a duplicate turn
adds nothing. The job itself is memory's (``memory/extraction/job.py``); this side only names
it and decides, inside the turn's transaction, whether one is due.
"""

from __future__ import annotations

from typing import Any

from pawwake.db import extraction as db
from pawwake.db import jobs as jobs_db
from pawwake.settings import Settings
from pawwake.text.rounds import count_complete_rounds, group_rounds

EXTRACT_KIND = "memory_extract"


def extraction_due(settings: Settings, complete_rounds: int) -> bool:
    interval = settings.MEMORY_EXTRACT_INTERVAL
    return (settings.MEMORY_ENABLED and interval > 0 and complete_rounds > 0
            and complete_rounds % interval == 0)


async def schedule_extraction(cur: Any, settings: Settings, session_id: str) -> int | None:
    """Enqueue extraction when the session's newest round closed an interval.

    Call inside the transaction that stored the turn: the job then exists exactly when the
    turn does. Returns the job id, or None when nothing is due (or it is already queued).
    """
    if not settings.MEMORY_ENABLED or settings.MEMORY_EXTRACT_INTERVAL <= 0:
        return None
    skeleton = await db.session_skeleton(cur, session_id)
    rounds = group_rounds(skeleton)
    if not rounds or not rounds[-1].complete:
        return None  # a user-only event or a pending tool call closes nothing
    count = count_complete_rounds(skeleton)
    if not extraction_due(settings, count):
        return None
    return await jobs_db.enqueue(cur, EXTRACT_KIND, {"session_id": session_id, "rounds": count},
                                 dedupe_key=f"{session_id}:{count}")
