"""What the merge parts of the memories page show: the sources of a merged memory and the
core candidates, numbered for people (ids only in form values)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from pawwake.app_faces import database_of, settings_of
from pawwake.dashboard.memories.view import row_view, zone_of
from pawwake.database import Database
from pawwake.db.errors import DatabaseUnavailable
from pawwake.memory.consolidation import merge
from pawwake.settings import Settings

# Why a revert cannot run now; each has a message in the catalog ("revert.<code>").
REVERT_BLOCKERS = ("not_merged", "source_missing", "merged_again", "source_merged_elsewhere",
                   "source_superseded", "merge_changed")


def blocker_key(code: str | None) -> str | None:
    if code is None:
        return None
    return f"revert.{code}" if code in REVERT_BLOCKERS else "revert.other"


async def sources_view(database: Database, memory_id: int, zone: Any, *, settings: Settings
                       ) -> dict[str, Any]:
    """The sources of a merged memory, oldest first, and whether a revert would work now."""
    found = await merge.sources_of(database, memory_id, settings=settings)
    sources = []
    for number, source in enumerate(found["sources"], 1):
        item = row_view(source, number, zone)
        item["state_key"] = ("sources.state_archived" if not source["is_active"]
                             else "sources.state_active")
        sources.append(item)
    blocker = found["revert_blocker"]
    return {"kind": "sources", "merged": found["merged"], "sources": sources,
            "missing": len(found["missing_ids"]), "can_revert": found["can_revert"],
            "blocker_key": blocker_key(blocker["code"]) if blocker else None,
            "memory_id": int(found["memory"]["id"])}


def reason_view(reason: dict[str, Any]) -> dict[str, Any]:
    if reason["code"] == "many_sources":
        return {"key": "candidates.many_sources",
                "values": {"count": reason["sources"], "fragments": reason["fragments"],
                           "events": reason["events"]}}
    return {"key": "candidates.high_importance", "values": {"value": reason["importance"]}}


async def candidates_context(request: web.Request, *, notice: dict[str, str] | None = None
                             ) -> dict[str, Any]:
    """Events that look like core memories (never promoted by themselves), with reasons."""
    try:
        found = await merge.core_candidates(database_of(request))
    except DatabaseUnavailable:
        return {"available": False, "entries": [], "notice": notice}
    zone = zone_of(await settings_of(request))
    items = []
    for number, candidate in enumerate(found, 1):
        item = row_view(candidate, number, zone)
        item["reasons"] = [reason_view(reason) for reason in candidate["reasons"]]
        items.append(item)
    return {"available": True, "entries": items, "notice": notice}
