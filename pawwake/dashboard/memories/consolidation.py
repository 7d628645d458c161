"""Organising memories into events from the memories page: start a draft run for the selection
or a date range, watch it (the panel polls itself while it runs), then edit, skip and confirm
drafts. Confirming all leaves out drafts that hold a core memory: those are confirmed one by
one, with their own tick box.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from pawwake.app_faces import MEMORY_WRITES, database_of, face_of, settings_of
from pawwake.dashboard.i18n import request_language, translate
from pawwake.dashboard.memories.consolidation_context import consolidation_context, latest_drafts
from pawwake.dashboard.memories.listing import (
    CONSOLIDATION,
    message,
    respond,
    selected_ids,
)
from pawwake.dashboard.memories.view import View, parse_view
from pawwake.dashboard.render import is_htmx
from pawwake.db.errors import NotFound
from pawwake.memory.consolidation import drafts as consolidate
from pawwake.memory.consolidation import merge
from pawwake.memory.consolidation.merge import DetailedConflict, MergeRequest
from pawwake.memory.fields import (
    FieldError,
    parse_content,
    parse_event_date,
    parse_importance,
    parse_int,
    parse_title,
)
from pawwake.text.numbers import number_or_text, whole_number

log = logging.getLogger(__name__)

BULK_RESULT = "partials/_memory_bulk_result.html"

# Refusals of a start, each explained in the catalog as "organise.refused_<code>".
START_REFUSALS = ("memory_archived", "memory_has_reminder", "invalid_range", "range_too_long",
                  "nothing_to_consolidate", "too_many_memories", "too_few_memories",
                  "consolidation_running", "not_running")
# Refusals of a confirm, explained as "drafts.refused_<code>".
CONFIRM_REFUSALS = ("source_changed", "source_archived", "already_merged",
                    "source_has_reminder", "core_confirmation_required", "layer_below_sources")


def _to_panel(request: web.Request) -> web.HTTPSeeOther:
    return web.HTTPSeeOther(str(request.app.router["memories"].url_for()) + "#consolidation")


async def _panel(request: web.Request, view: View, *, status: int = 200,
                 oob: tuple[str, ...] = (), **panel: Any) -> web.Response:
    context = await consolidation_context(request, **panel)
    return await respond(request, view, fragment=CONSOLIDATION, consolidation=context,
                         oob=oob, status=status)


async def show(request: web.Request) -> web.Response:
    """The panel; htmx polls it every second while drafts are being made."""
    if not is_htmx(request):
        raise _to_panel(request)
    return await _panel(request, View())


def start_refusal(lang: str, code: str) -> str:
    if code in START_REFUSALS:
        return translate(lang, f"organise.refused_{code}")
    return translate(lang, "organise.refused_other")


async def start(request: web.Request) -> web.Response:
    """Queue drafts for the ticked rows, or for a range of local days."""
    lang = request_language(request)
    form = await request.post()
    view = parse_view(form)
    # From the selection bar (htmx): the answer goes next to the bar, the panel updates too.
    from_bar = is_htmx(request) and form.get("from_bar") == "1"
    ids: list[int] = []
    try:
        ids = selected_ids(form)
        if ids:
            if len(ids) < 2:
                raise FieldError("ids", "too few", "too_few_memories")
            await consolidate.start_selection(face_of(request, MEMORY_WRITES), ids,
                                              settings=await settings_of(request))
        else:
            date_from = parse_event_date(_text(form, "date_from") or None, "date_from")
            date_to = parse_event_date(_text(form, "date_to") or None, "date_to")
            if date_from is None or date_to is None:
                raise FieldError("date_from", "dates needed", "missing_dates")
            await consolidate.start_range(face_of(request, MEMORY_WRITES), date_from, date_to,
                                          settings=await settings_of(request))
    except DetailedConflict as exc:
        if from_bar:
            return await _bar_result(request, view, 409, message(
                "alert", start_refusal(lang, exc.code)))
        return await _panel(request, view, status=409, problem=start_refusal(lang, exc.code))
    except FieldError as exc:
        text = (translate(lang, "organise.bad_dates") if exc.field in ("date_from", "date_to")
                and exc.code not in START_REFUSALS else start_refusal(lang, exc.code))
        if from_bar:
            return await _bar_result(request, view, 400, message("alert", text))
        return await _panel(request, view, status=400, problem=text)
    if from_bar:
        return await _bar_result(request, view, 200, message(
            "notice", translate(lang, "organise.bar_started", count=len(ids))))
    if not is_htmx(request):
        raise _to_panel(request)
    return await _panel(request, view, oob=("region",))


async def _bar_result(request: web.Request, view: View, status: int,
                      result: dict[str, str]) -> web.Response:
    # The list is left as it is: the selection (and so the bar with this answer) stays.
    oob = ("consolidation",) if status == 200 else ()
    return await respond(request, view, fragment=BULK_RESULT, oob=oob, status=status,
                         bulk_result=result)


async def cancel(request: web.Request) -> web.Response:
    lang = request_language(request)
    form = await request.post()
    view = parse_view(form)
    try:
        await consolidate.cancel(database_of(request))
    except DetailedConflict as exc:
        return await _panel(request, view, status=409, problem=start_refusal(lang, exc.code))
    if not is_htmx(request):
        raise _to_panel(request)
    return await _panel(request, view)


def _text(form: Mapping[str, Any], name: str) -> str:
    value = form.get(name)
    return value.replace("\r\n", "\n") if isinstance(value, str) else ""


def draft_request(form: Mapping[str, Any], number: int, draft: Mapping[str, Any]
                  ) -> MergeRequest:
    """The edited draft as a confirm request; FieldError names the field typed wrong."""
    importance_text = _text(form, f"importance-{number}").strip()
    layer_text = _text(form, f"layer-{number}").strip()
    return MergeRequest(
        draft_id=str(draft["draft_id"]),
        content=parse_content(_text(form, f"content-{number}")),
        title=parse_title(_text(form, f"title-{number}")), title_given=True,
        importance=parse_importance(number_or_text(importance_text)),
        layer=parse_int(number_or_text(layer_text), "layer", 2, 3),
        confirm_core=bool(draft["includes_core"]) and bool(form.get(f"core-{number}")))


async def _confirm_one(request: web.Request, form: Mapping[str, Any], number: int,
                       draft: Mapping[str, Any]) -> dict[str, Any]:
    """Confirm one draft; the outcome is a message and, for typing errors, field errors."""
    lang = request_language(request)
    if draft["includes_core"] and not form.get(f"core-{number}"):
        return {"ok": False, "message": message("alert", translate(lang, "drafts.core_needs_ok"))}
    try:
        wanted = draft_request(form, number, draft)
        await merge.merge_memories(face_of(request, MEMORY_WRITES), wanted,
                                   settings=await settings_of(request))
    except DetailedConflict as exc:
        key = f"drafts.refused_{exc.code}" if exc.code in CONFIRM_REFUSALS else "drafts.refused"
        return {"ok": False, "message": message("alert", translate(lang, key))}
    except NotFound:
        return {"ok": False, "message": message("alert", translate(lang, "drafts.gone"))}
    except FieldError as exc:
        if exc.code == "layer_below_sources":
            text = translate(lang, "drafts.refused_layer_below_sources")
            return {"ok": False, "message": message("alert", text), "errors": {"layer": text}}
        field = exc.field if exc.field in ("content", "title", "importance", "layer") else "content"
        text = translate(lang, f"memories.invalid_{field}")
        return {"ok": False, "field_error": True, "errors": {field: text},
                "message": message("alert", text)}
    return {"ok": True, "message": message("notice", translate(lang, "drafts.confirmed"))}


async def confirm(request: web.Request) -> web.Response:
    """Confirm one draft (``confirm=N``) or every ready draft without a core source."""
    lang = request_language(request)
    form = await request.post()
    view = parse_view(form)
    drafts = await latest_drafts(database_of(request))
    by_number = dict(enumerate(drafts, 1))
    sent = {n: form.get(f"draft-{n}") for n in by_number}
    if not drafts or any(value is not None and value != by_number[n]["draft_id"]
                         for n, value in sent.items()):
        return await _panel(request, view, status=409,
                            problem=translate(lang, "drafts.outdated"))
    choice = form.get("confirm")
    if choice == "all":
        targets = [n for n, d in by_number.items() if d["state"] == "ready"
                   and not d["includes_core"] and not form.get(f"skip-{n}")]
    elif (chosen := whole_number(choice)) is not None and chosen in by_number:
        targets = [chosen]
    else:
        return await _panel(request, view, status=400,
                            problem=translate(lang, "memories.bad_action"))
    outcomes = {n: await _confirm_one(request, form, n, by_number[n]) for n in targets}
    confirmed = sum(outcome["ok"] for outcome in outcomes.values())
    failed = len(outcomes) - confirmed
    if not targets:
        summary = message("alert", translate(lang, "drafts.none_ready"))
    elif failed:
        summary = message("alert" if not confirmed else "notice", translate(
            lang, "drafts.summary_failed", confirmed=confirmed, failed=failed))
    else:
        summary = message("notice", translate(lang, "drafts.summary", confirmed=confirmed))
    status = 200
    if not confirmed:
        status = 400 if targets and all(o.get("field_error") for o in outcomes.values()) \
            else 409
    log.info("dashboard confirmed %s of %s drafts", confirmed, len(targets))
    return await _panel(request, view, status=status, oob=("region", "candidates"),
                        submitted=form, outcomes=outcomes, notice=summary)


def setup(dashboard: web.Application) -> None:
    add = dashboard.router
    add.add_get("/memories/organise", show, name="memories_organise")
    add.add_post("/memories/organise", start, name="memories_organise_start")
    add.add_post("/memories/organise/cancel", cancel, name="memories_organise_cancel")
    add.add_post("/memories/drafts", confirm, name="memories_drafts")
