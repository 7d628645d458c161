"""The memories page's list region and page assembly: tabs with counts, rows numbered for
people, paging, search results, and the side panels; one respond() for page or fragments.

Handlers call the memory services directly (the dashboard cookie never authorises /api).
Database ids only travel in form values and htmx attributes.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

from aiohttp import web

from pawwake.app_faces import MEMORY_SEARCH, database_of, face_of, settings_of
from pawwake.dashboard.i18n import translate
from pawwake.dashboard.memories.backfill import backfill_context
from pawwake.dashboard.memories.consolidation_context import consolidation_context
from pawwake.dashboard.memories.merge_context import candidates_context, sources_view
from pawwake.dashboard.memories.view import (
    LAYERS,
    PAGE_SIZE,
    SEARCH_LIMIT,
    View,
    layer_counts,
    page_count,
    row_view,
    zone_of,
)
from pawwake.dashboard.render import is_htmx, render
from pawwake.database import Database
from pawwake.db.errors import NotFound
from pawwake.memory import store
from pawwake.memory.faces import MemorySearch
from pawwake.memory.fields import FieldError, parse_ids
from pawwake.memory.search import FALLBACK_CODES, MAX_LIMIT, search_memories
from pawwake.settings import Settings
from pawwake.text.numbers import whole_number

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
PAGE = "dashboard/memories.html"
REGION = "partials/_memory_region.html"
ROW = "partials/_memory_row.html"
PARTS = "partials/_memory_parts.html"  # a main fragment plus out-of-band parts
CONSOLIDATION = "partials/_memory_consolidation.html"
CANDIDATES = "partials/_memory_candidates.html"
MERGE_FORM = "partials/_memory_merge.html"
MAX_ID = 2 ** 63 - 1


# Refusals on the memory pages: a view parameter (400), a missing row (404), the database off
# (503), each worded in the reader's language from the ``memories.`` catalog.


def memory_id_from(values: Mapping[str, Any]) -> int:
    """The row id a form or hx attribute carries; anything else is a missing row (404)."""
    raw = values.get("id", "")
    text = raw.strip() if isinstance(raw, str) else ""
    number = whole_number(text)
    if number is None or not 1 <= number <= MAX_ID:
        raise NotFound("no such memory")
    return number


def row_number_from(values: Mapping[str, Any]) -> int:
    raw = values.get("n", "")
    text = raw.strip() if isinstance(raw, str) else ""
    number = whole_number(text, max_digits=6)
    return number if number else 1


def selected_ids(form: Any) -> list[int]:
    """The ids of the rows ticked in the list (checkbox values); FieldError when malformed."""
    raw = [value for value in form.getall("ids", []) if isinstance(value, str)]
    numbers = [whole_number(value.strip()) for value in raw]
    if any(number is None for number in numbers):
        raise FieldError("ids", "ids must be whole numbers")
    return parse_ids([number for number in numbers if number is not None]) if raw else []


def message(kind: str, text: str) -> dict[str, str]:
    """A notice ("notice") or a refusal ("alert") shown above the list or in a row."""
    return {"kind": kind, "text": text}


async def _search_rows(search: MemorySearch, settings: Settings, view: View, zone: Any
                       ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    if view.mode == "keyword":
        settings = settings.with_values({"MEMORY_VECTOR_ENABLED": False})
    limit = SEARCH_LIMIT if view.layer is None else MAX_LIMIT
    outcome = await search_memories(search, view.q, limit=limit, settings=settings)
    results = [r for r in outcome.results
               if view.layer is None or int(r.memory["layer"]) == view.layer][:SEARCH_LIMIT]
    rows = [row_view(r.memory, number, zone, score=r.score, parts=r.parts,
                     similarity=r.similarity) for number, r in enumerate(results, 1)]
    fell_back = view.mode == "semantic" and outcome.mode != "hybrid"
    summary = {"requested": view.mode, "used": outcome.mode, "count": len(rows),
               "fell_back": fell_back, "reason": fallback_reason(outcome.fallback),
               "detail": outcome.warning if fell_back else None}
    return rows, summary


def fallback_reason(code: str | None) -> str:
    """Catalog key explaining why a semantic search used keywords only
    (``SearchOutcome.fallback``)."""
    return f"memories.fallback_{code}" if code in FALLBACK_CODES else "memories.fallback_other"


async def region_context(request: web.Request, view: View, *,
                         notice: dict[str, str] | None = None,
                         edit_number: int | None = None,
                         versions_number: int | None = None,
                         sources_number: int | None = None,
                         report: dict[str, Any] | None = None) -> dict[str, Any]:
    """Everything the list region needs for ``view``: tabs with counts, rows, pager, search."""
    settings = await settings_of(request)
    zone = zone_of(settings)
    stats = await store.layer_stats(database_of(request))
    counts = layer_counts(stats, view.status)
    search = None
    if view.searching:
        rows, search = await _search_rows(face_of(request, MEMORY_SEARCH), settings, view, zone)
        total = len(rows)
    else:
        view = view.listing()
        total = counts[view.layer]
        pages = page_count(total)
        if view.page > pages:
            view = replace(view, page=pages)
        memories, total = await store.list_memories(database_of(request), active=view.active,
                                                    layer=view.layer, limit=PAGE_SIZE,
            offset=(view.page - 1) * PAGE_SIZE)
        first = (view.page - 1) * PAGE_SIZE + 1
        rows = [row_view(m, first + i, zone) for i, m in enumerate(memories)]
    for row in rows:
        row.update(edit=None, panel=None, message=None)
        if row["n"] == edit_number:
            row["edit"] = edit_state(row)
        if row["n"] == versions_number:
            row["panel"] = await versions_view(database_of(request), row["id"], zone)
        elif row["n"] == sources_number and row["merged_count"]:
            row["panel"] = await sources_view(database_of(request), row["id"], zone,
                                                  settings=settings)
    return {"view": view, "tabs": tabs(request, view, stats, counts), "rows": rows,
            "total": total, "pager": pager(request, view, total), "search": search,
            "notice": notice, "report": report,
            "list_url": str(request.app.router["memories"].url_for().with_query(view.query()))}


def tabs(request: web.Request, view: View, stats: Mapping[str, Any],
         counts: Mapping[int | None, int]) -> dict[str, list[dict[str, Any]]]:
    route = request.app.router["memories"]
    statuses = [{"key": status, "label": f"memories.status_{status}", "count": stats[status],
                 "url": str(route.url_for().with_query(View(status=status).query())),
                 "current": status == view.status} for status in ("active", "archived")]
    layers = [{"key": "all" if layer is None else str(layer),
               "label": "memories.layer_all" if layer is None else f"layer.{layer}",
               "count": counts[layer],
               "url": str(route.url_for().with_query(
                   View(status=view.status, layer=layer).query())),
               "current": layer == view.layer}
              for layer in (None, *LAYERS)]
    return {"statuses": statuses, "layers": layers}


def pager(request: web.Request, view: View, total: int) -> dict[str, Any] | None:
    if view.searching:
        return None
    pages = page_count(total)
    route = request.app.router["memories"]

    def url(page: int) -> str:
        return str(route.url_for().with_query(view.query(page=page)))

    return {"page": view.page, "pages": pages, "total": total,
            "prev": url(view.page - 1) if view.page > 1 else None,
            "next": url(view.page + 1) if view.page < pages else None}


def edit_state(row: Mapping[str, Any], values: Mapping[str, Any] | None = None,
               errors: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The inline editor's fields: what is stored, or what was typed when it was refused."""
    shown = {"content": row["content"], "title": row["title"] or "",
             "importance": str(row["importance"]), "layer": str(row["layer"])}
    for name, value in (values or {}).items():
        shown[name] = "" if value is None else str(value)
    return {"fields": shown, "errors": dict(errors or {})}


async def versions_view(database: Database, memory_id: int, zone: Any) -> dict[str, Any]:
    """The version chain of a row, oldest first, and which member an undo would act on."""
    chain = await store.versions(database, memory_id)
    current = [m for m in chain if m["superseded_by"] is None and m["is_active"]]
    current_id = current[-1]["id"] if current else None
    replaced_ids = {m["superseded_by"] for m in chain if m["superseded_by"] is not None}
    items = []
    for number, memory in enumerate(chain, 1):
        item = row_view(memory, number, zone)
        item["state"] = ("current" if memory["id"] == current_id
                         else "replaced" if memory["superseded_by"] is not None else "archived")
        item["state_key"] = f"versions.state_{item['state']}"
        item["selected"] = memory["id"] == memory_id
        items.append(item)
    undo_id = current_id if current_id in replaced_ids else None
    return {"kind": "versions", "members": items, "undo_id": undo_id,
            "single": len(chain) == 1}


async def page_context(request: web.Request, view: View, *,
                       consolidation: dict[str, Any] | None = None,
                       candidates: dict[str, Any] | None = None,
                       merge_form: dict[str, Any] | None = None,
                       **region_extra: Any) -> dict[str, Any]:
    """The whole page: the list region and every side panel."""
    context = await region_context(request, view, **region_extra)
    context["backfill"] = await backfill_context(request)
    context["consolidation"] = consolidation or await consolidation_context(request)
    context["candidates"] = candidates or await candidates_context(request)
    context["merge_form"] = merge_form
    return context


async def respond(request: web.Request, view: View, *, fragment: str = REGION,
                  oob: Iterable[str] = (), status: int = 200,
                  consolidation: dict[str, Any] | None = None,
                  candidates: dict[str, Any] | None = None,
                  merge_form: dict[str, Any] | None = None,
                  headers: Mapping[str, str] | None = None,
                  **region_extra: Any) -> web.Response:
    """htmx: ``fragment`` plus the parts named in ``oob`` swapped out of band ("region",
    "consolidation", "candidates", "merge"). Otherwise the whole page."""
    if not is_htmx(request):
        page = await page_context(request, view, consolidation=consolidation,
                                  candidates=candidates, merge_form=merge_form, **region_extra)
        return render(request, PAGE, page, status=status)
    parts = set(oob)
    context: dict[str, Any] = {"main_fragment": fragment, "oob": parts,
                               "bulk_result": region_extra.pop("bulk_result", None)}
    if fragment == REGION or "region" in parts:
        context.update(await region_context(request, view, **region_extra))
    else:
        context["view"] = view
    if fragment == CONSOLIDATION or "consolidation" in parts:
        context["consolidation"] = consolidation or await consolidation_context(request)
    if fragment == CANDIDATES or "candidates" in parts:
        context["candidates"] = candidates or await candidates_context(request)
    context["merge_form"] = merge_form
    return render(request, PAGE, context, fragment=PARTS, status=status, headers=headers)


async def render_region(request: web.Request, view: View, *, status: int = 200,
                        **extra: Any) -> web.Response:
    """The whole page, or for htmx the list region only."""
    return await respond(request, view, status=status, **extra)


def field_message(lang: str, exc: FieldError) -> str:
    key = f"memories.invalid_{exc.field}" if exc.field in (
        "content", "importance", "layer", "title") else "memories.invalid_edit"
    return translate(lang, key)


