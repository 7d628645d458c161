"""Writes from the memories page: archive, restore and delete a row, bulk actions, undoing a
supersede and cleaning up old archived fragments.

Permanent deletes need ``confirmed=1``: the page's dialog adds it; without script the server
answers with a confirmation page first. Refusals (a version-chain member, a merge source...)
come back as a clear message with status 409, next to the row they concern.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from pawwake.app_faces import database_of, settings_of
from pawwake.dashboard.i18n import request_language, translate
from pawwake.dashboard.memories.listing import (
    PAGE,
    ROW,
    memory_id_from,
    message,
    render_region,
    row_number_from,
    selected_ids,
)
from pawwake.dashboard.memories.view import View, parse_view, row_view, zone_of
from pawwake.dashboard.refusals import PageRefusal
from pawwake.dashboard.render import is_htmx, render
from pawwake.memory import store
from pawwake.memory.fields import FieldError
from pawwake.memory.store import MemoryConflict

log = logging.getLogger(__name__)

ROW_OPS = ("archive", "restore", "delete")
BULK_ACTIONS = ("archive", "restore", "delete", "layer")
MAX_CLEANUP_DAYS = 36500
PREVIEW_ROWS = 10

# MemoryConflict codes the page explains in the visitor's language.
REFUSALS = ("already_archived", "not_archived", "superseded", "version_chain_member",
            "merge_source", "archived", "not_superseded", "chain_changed",
            "newer_not_current")


def refusal_text(lang: str, exc: MemoryConflict) -> str:
    if exc.code in REFUSALS:
        return translate(lang, f"refusal.{exc.code}")
    return translate(lang, "refusal.other", detail=exc.message)


def confirmed(form: Mapping[str, Any]) -> bool:
    return form.get("confirmed") == "1"


def view_fields(view: View) -> list[tuple[str, str]]:
    """Hidden fields that bring a confirmation back to the same view."""
    fields = list(view.query().items())
    if view.searching:
        fields += [("q", view.q), ("mode", view.mode)]
    return fields


def confirm_page(request: web.Request, view: View, *, title: str, text: str,
                 items: list[dict[str, Any]], action: str, fields: list[tuple[str, str]],
                 button: str) -> web.Response:
    """The no-script confirmation step: the same form again, with ``confirmed=1``."""
    cancel = request.app.router["memories"].url_for().with_query(view.query())
    confirm = {"title": title, "text": text, "previews": items, "action": action,
               "fields": [*fields, *view_fields(view), ("confirmed", "1")],
               "button": button, "cancel": str(cancel)}
    return render(request, PAGE, {"confirm": confirm})


async def _refused(request: web.Request, view: View, memory_id: int, number: int,
                   text: str) -> web.Response:
    """A refusal shown in its row (htmx) or above the list (a plain form)."""
    if not is_htmx(request):
        return await render_region(request, view, status=409,
                                   notice=message("alert", text))
    settings = await settings_of(request)
    memory = await store.get_memory(database_of(request), memory_id)
    row = row_view(memory, number, zone_of(settings))
    row.update(edit=None, panel=None, message=message("alert", text))
    return render(request, ROW, {"row": row, "view": view}, status=409,
                  headers={"HX-Retarget": f"#memory-row-{number}", "HX-Reswap": "outerHTML"})


async def row_action(request: web.Request) -> web.Response:
    """Archive, restore or permanently delete one row."""
    lang = request_language(request)
    form = await request.post()
    view = parse_view(form)
    op = form.get("op")
    if op not in ROW_OPS:
        raise PageRefusal("memories.bad_action")
    memory_id, number = memory_id_from(form), row_number_from(form)
    if op == "delete" and not confirmed(form):
        memory = await store.get_memory(database_of(request), memory_id)
        return confirm_page(
            request, view, title=translate(lang, "confirm.delete_title"),
            text=translate(lang, "confirm.delete_one", n=number),
            items=[{"n": number, "content": memory["content"]}],
            action=str(request.app.router["memory_action"].url_for()),
            fields=[("op", "delete"), ("id", str(memory_id)), ("n", str(number))],
            button=translate(lang, "memories.delete"))
    try:
        if op == "archive":
            await store.archive_memory(database_of(request), memory_id)
        elif op == "restore":
            await store.restore_memory(database_of(request), memory_id)
        else:
            await store.delete_memory(database_of(request), memory_id)
    except MemoryConflict as exc:
        return await _refused(request, view, memory_id, number, refusal_text(lang, exc))
    done = translate(lang, f"memories.done_{op}", n=number)
    return await render_region(request, view, notice=message("notice", done))


def report_text(lang: str, action: str, report: Mapping[str, Any]) -> str:
    """``已归档 3 条；跳过 1 条（已归档 1）`` from a batch report."""
    text = translate(lang, f"bulk.done_{action}", count=report["processed"])
    skipped = report.get("skipped") or {}
    if skipped:
        reasons = "，" if lang == "zh" else ", "
        detail = reasons.join(translate(lang, f"skip.{reason}", count=count)
                              for reason, count in sorted(skipped.items()))
        text += translate(lang, "bulk.skipped", count=sum(skipped.values()), detail=detail)
    return text


async def bulk(request: web.Request) -> web.Response:
    """One action on every selected row; the answer states what really happened."""
    lang = request_language(request)
    form = await request.post()
    view = parse_view(form)
    action = form.get("action")
    if action not in BULK_ACTIONS:
        raise PageRefusal("memories.bad_action")
    try:
        ids = selected_ids(form)
    except FieldError:
        raise PageRefusal("bulk.bad_selection") from None
    if not ids:
        return await render_region(request, view, status=400,
                                   notice=message("alert", translate(lang, "bulk.none")))
    target_layer = None
    if action == "layer":
        layer_text = form.get("to_layer")
        if layer_text not in ("1", "2", "3"):
            return await render_region(request, view, status=400, notice=message(
                "alert", translate(lang, "bulk.bad_layer")))
        target_layer = int(str(layer_text))
    if action == "delete" and not confirmed(form):
        previews = []
        for memory_id in ids[:PREVIEW_ROWS]:
            try:
                previews.append({"content": (await store.get_memory(database_of(request),
                                                                    memory_id))["content"]})
            except LookupError:
                continue
        return confirm_page(
            request, view, title=translate(lang, "confirm.delete_title"),
            text=translate(lang, "confirm.delete_many", count=len(ids)), items=previews,
            action=str(request.app.router["memories_bulk"].url_for()),
            fields=[("action", "delete"), *(("ids", str(i)) for i in ids)],
            button=translate(lang, "memories.delete"))
    if action == "archive":
        report = await store.batch_archive(database_of(request), ids)
    elif action == "restore":
        report = await store.batch_restore(database_of(request), ids)
    elif action == "delete":
        report = await store.batch_delete(database_of(request), ids)
    else:  # "layer", the one action left (BULK_ACTIONS), with its layer read above
        assert target_layer is not None
        report = await store.batch_update(database_of(request), ids, {"layer": target_layer})
    log.info("dashboard bulk %s: %s of %s", action, report["processed"], report["requested"])
    return await render_region(request, view, notice=message(
        "notice", report_text(lang, action, report)))


async def undo_supersede(request: web.Request) -> web.Response:
    lang = request_language(request)
    form = await request.post()
    view = parse_view(form)
    try:
        await store.undo_supersede(database_of(request), memory_id_from(form))
    except MemoryConflict as exc:
        return await render_region(request, view, status=409,
                                   notice=message("alert", refusal_text(lang, exc)))
    return await render_region(request, view, notice=message(
        "notice", translate(lang, "versions.undone")))


def _days(value: Any) -> float | None:
    try:
        days = float(str(value).strip())
    except ValueError:
        return None
    return days if 0 <= days <= MAX_CLEANUP_DAYS else None


async def cleanup(request: web.Request) -> web.Response:
    """Delete archived fragments older than N days (after a confirmation), with the report."""
    lang = request_language(request)
    form = await request.post()
    view = parse_view(form)
    days = _days(form.get("days", ""))
    if days is None:
        return await render_region(request, view, status=400, notice=message(
            "alert", translate(lang, "cleanup.bad_days", most=MAX_CLEANUP_DAYS)))
    shown_days = f"{days:g}"
    if not confirmed(form):
        return confirm_page(
            request, view, title=translate(lang, "cleanup.title"),
            text=translate(lang, "cleanup.confirm", days=shown_days), items=[],
            action=str(request.app.router["memories_cleanup"].url_for()),
            fields=[("days", shown_days)], button=translate(lang, "cleanup.run"))
    result = await store.cleanup_fragments(database_of(request), days)
    report = {"days": shown_days, "deleted": result["deleted"], "chain": result["kept"],
              "sources": result["merge_sources_deleted"], "merges": result["merges_ended"]}
    text = translate(lang, "cleanup.done", **report)
    return await render_region(request, view, notice=message("notice", text), report=report)


def setup(dashboard: web.Application) -> None:
    add = dashboard.router
    add.add_post("/memories/action", row_action, name="memory_action")
    add.add_post("/memories/bulk", bulk, name="memories_bulk")
    add.add_post("/memories/undo-supersede", undo_supersede, name="memory_undo_supersede")
    add.add_post("/memories/cleanup", cleanup, name="memories_cleanup")
