"""What the consolidation panel shows: the latest draft run, its progress and its drafts.

Drafts are numbered 1..n on the page; their ids only travel in form values. Edits live in the
form until a draft is confirmed (nothing is stored before that), so a re-rendered panel keeps
what was typed for every draft that was not confirmed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiohttp import web
from aiohttp_session import get_session

from pawwake.app_faces import database_of, settings_of
from pawwake.dashboard.memories.view import LAYER_KEYS, zone_of
from pawwake.database import Database
from pawwake.db.errors import DatabaseUnavailable
from pawwake.local_time import local_today
from pawwake.memory.consolidation import drafts as consolidate

RUNNING = ("queued", "running", "retrying")
# Error codes of a failed run that the page explains in the visitor's language.
RUN_ERRORS = ("cancelled", "selection_changed", "rate_limited", "model_refused",
              "item_too_long", "answer_truncated", "answer_unreadable", "answer_incomplete")
DRAFT_STATES = ("ready", "stale", "confirmed")


def draft_field(submitted: Mapping[str, Any] | None, name: str, number: int,
                default: Any) -> str:
    if submitted is not None:
        value = submitted.get(f"{name}-{number}")
        if isinstance(value, str):
            return value.replace("\r\n", "\n")
    return "" if default is None else str(default)


def draft_view(draft: Mapping[str, Any], number: int, *,
               submitted: Mapping[str, Any] | None = None,
               outcome: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One draft as the form shows it: stored values, or what was typed if it is still open."""
    confirmed = draft["state"] == "confirmed"
    typed = None if confirmed else submitted
    floor = int(draft["layer"])
    return {
        "n": number,
        "draft_id": draft["draft_id"],
        "title": draft_field(typed, "title", number, draft["title"]),
        "content": draft_field(typed, "content", number, draft["content"]),
        "importance": draft_field(typed, "importance", number, draft["importance"]),
        "layer": draft_field(typed, "layer", number, draft["layer"]),
        "layers": [layer for layer in (2, 3) if layer >= floor],
        "includes_core": bool(draft["includes_core"]),
        "event_date": draft["event_date"],
        "day": draft.get("day"),
        "state": draft["state"] if draft["state"] in DRAFT_STATES else "stale",
        "state_key": f"drafts.state_{draft['state']}" if draft["state"] in DRAFT_STATES
        else "drafts.state_stale",
        "changed": len(draft.get("changed_ids") or ()),
        "skipped": bool(typed and typed.get(f"skip-{number}")),
        "core_ok": bool(typed and typed.get(f"core-{number}")),
        "sources": [{"n": i, "content": s["content"], "layer": s["layer"],
                     "layer_key": LAYER_KEYS.get(int(s["layer"]), "fragment"),
                     "day": s["local_date"]} for i, s in enumerate(draft["sources"], 1)],
        "outcome": dict(outcome["message"]) if outcome and outcome.get("message") else None,
        "errors": dict(outcome.get("errors", {})) if outcome else {},
    }


def _percent(progress: Mapping[str, Any]) -> int:
    total = int(progress.get("batches_total") or 0)
    done = int(progress.get("batches_done") or 0)
    return 0 if total == 0 else min(100, done * 100 // total)


FAILURE_SEEN = "organise_failure_seen"


async def first_sight_of_failure(request: web.Request, state: Mapping[str, Any]) -> bool:
    """A failed run is explained once per browser session; later visits start clean."""
    session = await get_session(request)
    if session.get(FAILURE_SEEN) == state["job_id"]:
        return False
    session[FAILURE_SEEN] = state["job_id"]
    return True


async def consolidation_context(request: web.Request, *,
                                submitted: Mapping[str, Any] | None = None,
                                outcomes: Mapping[int, Mapping[str, Any]] | None = None,
                                problem: str | None = None,
                                notice: dict[str, str] | None = None) -> dict[str, Any]:
    """The panel: a form to start a run, the run's progress, or its drafts."""
    try:
        state = await consolidate.status(database_of(request))
    except DatabaseUnavailable:
        return {"available": False, "problem": problem, "notice": notice}
    settings = await settings_of(request)
    outcomes = outcomes or {}
    drafts = [draft_view(d, n, submitted=submitted, outcome=outcomes.get(n))
              for n, d in enumerate(state.get("drafts") or [], 1)]
    progress = state.get("progress") or {}
    error = state.get("error") or {}
    if state["status"] == "failed" and not await first_sight_of_failure(request, state):
        error, state = {}, {**state, "status": "none"}  # seen once already: not stale news
    code = error.get("code")
    request_shown = state.get("request") or {}
    return {
        "available": True,
        "status": state["status"],
        "running": state["status"] in RUNNING,
        "mode": state.get("mode"),
        "date_from": request_shown.get("date_from"),
        "date_to": request_shown.get("date_to"),
        "selected": len(request_shown.get("ids") or ()),
        "progress": {"days_done": int(progress.get("days_done") or 0),
                     "days_total": int(progress.get("days_total") or 0),
                     "batches_done": int(progress.get("batches_done") or 0),
                     "batches_total": int(progress.get("batches_total") or 0),
                     "drafts": int(progress.get("drafts") or 0)},
        "percent": _percent(progress),
        "drafts": drafts,
        "ready": sum(d["state"] == "ready" for d in drafts),
        "error_key": f"organise.error_{code}" if code in RUN_ERRORS else (
            "organise.error_other" if state["status"] == "failed" else None),
        "error_detail": error.get("message") if code not in RUN_ERRORS else None,
        "retrying": state["status"] == "retrying",
        "problem": problem,
        "notice": notice,
        "today": local_today(zone_of(settings)).isoformat(),
    }


async def latest_drafts(database: Database) -> list[dict[str, Any]]:
    """The drafts of the latest finished run, with their current state."""
    state = await consolidate.status(database)
    return list(state.get("drafts") or []) if state["status"] == "done" else []
