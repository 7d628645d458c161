"""Merging by hand from the memories page, reverting a merge, and promoting core candidates.

The merge dialog starts from the ticked rows: their texts joined, the layer the merge must at
least have, and a tick box that a core source needs. Every refusal comes back in the dialog or
above the list with a real status.
"""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import web

from pawwake.app_faces import MEMORY_WRITES, database_of, face_of, settings_of
from pawwake.dashboard.i18n import request_language, translate
from pawwake.dashboard.memories.listing import (
    CANDIDATES,
    MERGE_FORM,
    REGION,
    memory_id_from,
    message,
    respond,
    selected_ids,
)
from pawwake.dashboard.memories.merge_context import blocker_key, candidates_context
from pawwake.dashboard.memories.view import LAYER_KEYS, View, parse_view
from pawwake.db.errors import NotFound
from pawwake.db.memory_rows import MemoryRow
from pawwake.memory import store
from pawwake.memory.consolidation import merge
from pawwake.memory.consolidation.merge import DetailedConflict, MergeRequest
from pawwake.memory.fields import (
    FieldError,
    parse_content,
    parse_importance,
    parse_int,
    parse_title,
)
from pawwake.memory.store import MemoryConflict
from pawwake.text.numbers import number_or_text

log = logging.getLogger(__name__)

MAX_MERGE = 50
MERGE_REFUSALS = ("source_archived", "already_merged", "source_has_reminder",
                  "core_confirmation_required", "layer_below_sources")


def merge_form_view(memories: list[MemoryRow], *, fields: dict[str, str] | None = None,
                    errors: dict[str, str] | None = None, problem: str | None = None
                    ) -> dict[str, Any]:
    """The merge dialog for these sources, with what was typed when it was refused."""
    floor = max(2, *(int(m["layer"]) for m in memories))
    shown = {"content": "\n".join(m["content"] for m in memories), "title": "",
             "importance": str(max(int(m["importance"]) for m in memories)),
             "layer": str(floor), **(fields or {})}
    return {"ids": [int(m["id"]) for m in memories],
            "sources": [{"n": n, "content": m["content"], "layer": int(m["layer"]),
                         "layer_key": LAYER_KEYS[int(m["layer"])]}
                        for n, m in enumerate(memories, 1)],
            "fields": shown, "layers": [layer for layer in (2, 3) if layer >= floor],
            "includes_core": any(int(m["layer"]) == 3 for m in memories),
            "errors": dict(errors or {}), "problem": problem}


async def _sources(request: web.Request, ids: list[int]) -> list[MemoryRow]:
    """The ticked memories, oldest first (the order their texts are joined in)."""
    found = [await store.get_memory(database_of(request), memory_id) for memory_id in ids]
    return sorted(found, key=lambda memory: (memory["created_at"], memory["id"]))


async def _dialog(request: web.Request, view: View, form: dict[str, Any], status: int
                  ) -> web.Response:
    """The dialog again (htmx swaps it into its slot wherever the form pointed)."""
    return await respond(request, view, fragment=MERGE_FORM, merge_form=form, status=status,
                         headers={"HX-Retarget": "#merge-slot", "HX-Reswap": "outerHTML"})


async def merge_dialog(request: web.Request) -> web.Response:
    """Open the merge dialog for the ticked rows."""
    lang = request_language(request)
    form = await request.post()
    view = parse_view(form)
    try:
        ids = selected_ids(form)
    except FieldError:
        ids = []
    if len(ids) < 2 or len(ids) > MAX_MERGE:
        text = translate(lang, "merge.selection", most=MAX_MERGE)
        return await respond(request, view, status=400, notice=message("alert", text),
                             headers={"HX-Retarget": "#memories-main", "HX-Reswap": "outerHTML"})
    return await _dialog(request, view, merge_form_view(await _sources(request, ids)), 200)


def _typed(form: Any) -> dict[str, str]:
    names = {"content": "content", "title": "title", "importance": "importance",
             "layer": "to_layer"}
    return {name: str(form.get(field, "")).replace("\r\n", "\n")
            for name, field in names.items()}


async def merge_submit(request: web.Request) -> web.Response:
    """Merge the sources into one memory with the edited text (one transaction)."""
    lang = request_language(request)
    form = await request.post()
    view = parse_view(form)
    ids = selected_ids(form)
    typed = _typed(form)
    sources = await _sources(request, ids)
    if len(sources) < 2:
        raise NotFound("merge sources")
    try:
        importance = typed["importance"].strip()
        layer = typed["layer"].strip()
        wanted = MergeRequest(
            source_ids=ids, content=parse_content(typed["content"]),
            title=parse_title(typed["title"]), title_given=True,
            importance=parse_importance(number_or_text(importance)),
            layer=parse_int(number_or_text(layer), "layer", 2, 3),
            confirm_core=bool(form.get("core_ok")))
        if any(int(s["layer"]) == 3 for s in sources) and not wanted.confirm_core:
            return await _dialog(request, view, merge_form_view(
                sources, fields=typed, problem=translate(lang, "drafts.core_needs_ok")), 409)
        result = await merge.merge_memories(face_of(request, MEMORY_WRITES), wanted,
                                            settings=await settings_of(request))
    except FieldError as exc:
        field = exc.field if exc.field in ("content", "title", "importance", "layer") \
            else "layer"
        key = ("drafts.refused_layer_below_sources" if exc.code == "layer_below_sources"
               else f"memories.invalid_{field}")
        return await _dialog(request, view, merge_form_view(
            sources, fields=typed, errors={field: translate(lang, key)}), 400)
    except DetailedConflict as exc:
        key = f"drafts.refused_{exc.code}" if exc.code in MERGE_REFUSALS else "drafts.refused"
        return await _dialog(request, view, merge_form_view(
            sources, fields=typed, problem=translate(lang, key)), 409)
    log.info("dashboard merged %s memories", len(result["archived_ids"]))
    text = translate(lang, "merge.done", count=len(result["archived_ids"]))
    return await respond(request, view, fragment=REGION, oob=("merge", "candidates"),
                         notice=message("notice", text),
                         headers={"HX-Retarget": "#memories-main", "HX-Reswap": "outerHTML"})


async def revert(request: web.Request) -> web.Response:
    """Restore every source of a merged memory and archive it (or change nothing)."""
    lang = request_language(request)
    form = await request.post()
    view = parse_view(form)
    try:
        result = await merge.revert_merge(face_of(request, MEMORY_WRITES), memory_id_from(form),
                                          settings=await settings_of(request))
    except DetailedConflict as exc:
        return await respond(request, view, status=409, oob=("candidates",),
                             notice=message("alert", translate(lang, blocker_key(exc.code)
                                                               or "revert.other")))
    text = translate(lang, "revert.done", count=len(result["restored_ids"]))
    return await respond(request, view, oob=("candidates",), notice=message("notice", text))


async def promote(request: web.Request) -> web.Response:
    """Make a candidate event a core memory (never done without this click)."""
    lang = request_language(request)
    form = await request.post()
    view = parse_view(form)
    try:
        await store.promote_memory(database_of(request), memory_id_from(form))
    except MemoryConflict:
        notice = message("alert", translate(lang, "refusal.archived"))
        return await respond(request, view, fragment=CANDIDATES, status=409,
                             candidates=await candidates_context(request, notice=notice))
    notice = message("notice", translate(lang, "candidates.promoted"))
    return await respond(request, view, fragment=CANDIDATES, oob=("region",),
                         candidates=await candidates_context(request, notice=notice))


def setup(dashboard: web.Application) -> None:
    add = dashboard.router
    add.add_post("/memories/merge/form", merge_dialog, name="memories_merge_form")
    add.add_post("/memories/merge", merge_submit, name="memories_merge")
    add.add_post("/memories/revert", revert, name="memory_revert")
    add.add_post("/memories/promote", promote, name="memory_promote")
