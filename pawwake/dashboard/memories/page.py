"""The memories page's handlers: the list, search, the inline editor and a row's panels
(versions, sources). Writes live in actions, merge and consolidation.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any, TypedDict

from aiohttp import web

from pawwake.app_faces import MEMORY_WRITES, database_of, face_of, settings_of
from pawwake.dashboard.i18n import request_language, translate
from pawwake.dashboard.memories.listing import (
    PAGE,
    ROW,
    edit_state,
    field_message,
    memory_id_from,
    message,
    page_context,
    render_region,
    row_number_from,
    versions_view,
)
from pawwake.dashboard.memories.merge_context import sources_view
from pawwake.dashboard.memories.view import (
    View,
    form_edit_values,
    parse_view,
    row_view,
    zone_of,
)
from pawwake.dashboard.render import is_htmx, render
from pawwake.memory import store
from pawwake.memory.fields import FieldError, parse_edit
from pawwake.text.numbers import whole_number

log = logging.getLogger(__name__)

PANEL = "partials/_memory_panel.html"


def _number(value: Any) -> int | None:
    """A row number from a query or form value (None when absent or not a number)."""
    return whole_number(value, max_digits=6)


class Opened(TypedDict):
    """Row numbers whose editor or panels are open (None: closed)."""

    edit_number: int | None
    versions_number: int | None
    sources_number: int | None


def _opened(values: Any) -> Opened:
    """Which row's editor or panel the request opens, by row number (no-script links)."""
    return {"edit_number": _number(values.get("edit")),
            "versions_number": _number(values.get("versions")),
            "sources_number": _number(values.get("sources"))}


async def memories(request: web.Request) -> web.Response:
    """The list; ``edit=N`` / ``versions=N`` / ``sources=N`` open row N's editor or panel."""
    view = parse_view(request.query)
    return await render_region(request, view.listing(), **_opened(request.query))


async def search(request: web.Request) -> web.Response:
    """Search by POST so private text stays out of URLs and access logs."""
    form = await request.post()
    view = parse_view(form)
    if not view.q:
        return await render_region(request, view.listing(), **_opened(form))
    return await render_region(request, replace(view, status="active", page=1),
                               **_opened(form))


async def _row_response(request: web.Request, view: View, memory: Any, number: int, *,
                        edit: dict[str, Any] | None = None,
                        notice: dict[str, str] | None = None,
                        status: int = 200) -> web.Response:
    settings = await settings_of(request)
    row = row_view(memory, number, zone_of(settings))
    row.update(edit=edit, message=notice, panel=None)
    return render(request, ROW, {"row": row, "view": view}, status=status)


def _to_list(request: web.Request, view: View, **opened: str) -> web.HTTPSeeOther:
    """Without htmx, a row's editor or panel opens in the list itself."""
    url = request.app.router["memories"].url_for().with_query({**view.query(), **opened})
    return web.HTTPSeeOther(str(url))


async def edit_form(request: web.Request) -> web.Response:
    """The inline editor of one row."""
    view = parse_view(request.query)
    number = row_number_from(request.query)
    if not is_htmx(request):
        raise _to_list(request, view, edit=str(number))
    memory = await store.get_memory(database_of(request), memory_id_from(request.query))
    row = row_view(memory, number, zone_of(await settings_of(request)))
    return await _row_response(request, view, memory, number, edit=edit_state(row))


async def show_row(request: web.Request) -> web.Response:
    """One row as the list shows it (cancelling an edit, closing a panel)."""
    view = parse_view(request.query)
    if not is_htmx(request):
        raise _to_list(request, view)
    memory = await store.get_memory(database_of(request), memory_id_from(request.query))
    return await _row_response(request, view, memory, row_number_from(request.query))


async def save_edit(request: web.Request) -> web.Response:
    """Validate with the API's rules; errors go back into the editor, next to the field."""
    lang = request_language(request)
    form = await request.post()
    view = parse_view(form)
    memory_id, number = memory_id_from(form), row_number_from(form)
    values = form_edit_values(form)
    zone = zone_of(await settings_of(request))
    try:
        changes = parse_edit(values)
    except FieldError as exc:
        memory = await store.get_memory(database_of(request), memory_id)
        errors = {exc.field or "content": field_message(lang, exc)}
        edit = edit_state(row_view(memory, number, zone), values, errors)
        if is_htmx(request):
            return await _row_response(request, view, memory, number, edit=edit, status=400)
        context = await page_context(request, view)
        _open_editor(context, row_view(memory, number, zone), edit)
        return render(request, PAGE, context, status=400)
    memory, changed = await store.edit_memory(face_of(request, MEMORY_WRITES), memory_id, changes)
    text = translate(lang, "memories.saved" if changed else "memories.unchanged", n=number)
    if is_htmx(request):
        return await _row_response(request, view, memory, number,
                                   notice=message("notice", text))
    return await render_region(request, view, notice=message("notice", text))


def _open_editor(context: dict[str, Any], row: dict[str, Any], edit: dict[str, Any]) -> None:
    """Show a refused edit in its row, or alone when the row is not in the current list."""
    for shown in context["rows"]:
        if shown["id"] == row["id"]:
            shown["edit"] = edit
            return
    context["rows"] = [{**row, "edit": edit, "panel": None, "message": None}]


async def _panel(request: web.Request, kind: str) -> web.Response:
    view = parse_view(request.query)
    number = row_number_from(request.query)
    if not is_htmx(request):
        raise _to_list(request, view, **{kind: str(number)})
    memory_id = memory_id_from(request.query)
    settings = await settings_of(request)
    zone = zone_of(settings)
    panel = (await versions_view(database_of(request), memory_id, zone) if kind == "versions"
             else await sources_view(database_of(request), memory_id, zone, settings=settings))
    row = {**row_view(await store.get_memory(database_of(request), memory_id), number, zone),
           "panel": panel}
    return render(request, PANEL, {"row": row, "view": view})


async def versions(request: web.Request) -> web.Response:
    """The version chain of a row, shown under it."""
    return await _panel(request, "versions")


async def sources(request: web.Request) -> web.Response:
    """The sources of a merged memory, shown under it, with the revert."""
    return await _panel(request, "sources")


def setup(dashboard: web.Application) -> None:
    add = dashboard.router
    add.add_get("/memories", memories, name="memories")
    add.add_post("/memories/search", search, name="memories_search")
    add.add_get("/memories/edit", edit_form, name="memory_edit_form")
    add.add_post("/memories/edit", save_edit, name="memory_edit")
    add.add_get("/memories/row", show_row, name="memory_row")
    add.add_get("/memories/versions", versions, name="memory_versions")
    add.add_get("/memories/sources", sources, name="memory_sources")
