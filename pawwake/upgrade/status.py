"""The adoption as the status page shows it: from which 4.x, when, and what came over."""

from __future__ import annotations

from typing import Any

from pawwake.db.legacy import progress
from pawwake.db.pool import Cursor


async def adoption_summary(cur: Cursor) -> dict[str, Any] | None:
    """None when this database was never adopted from 4.x."""
    state = await progress.load(cur)
    if state is None:
        return None

    def adopted(step: str) -> int:
        found = state.steps.get(step)
        return int(found.counts.get("adopted", 0)) if found else 0

    settings = state.steps.get("settings")
    return {"version": state.version, "started_at": state.started_at,
            "finished_at": state.finished_at,
            "memories": adopted("memories"), "messages": adopted("conversations"),
            "threads": adopted("threads"), "usage": adopted("usage"),
            "settings": len(settings.counts.get("stored", [])) if settings else 0,
            "not_taken": not_taken(state.survey)}


def not_taken(found: dict[str, Any]) -> int:
    """Rows of the source that adoption leaves out (blank memories, other roles and usage
    types): they stay in the kept 4.x tables."""
    return (int(found.get("memories", {}).get("blank", 0))
            + int(found.get("conversations", {}).get("other_roles", 0))
            + int(found.get("usage", {}).get("other_types", 0)))
