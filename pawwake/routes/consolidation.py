"""/api/memories consolidation: draft runs, confirm/merge, revert, sources, core candidates.

Refusals: 400 for a request that cannot work as sent (bad selection or range, too few sources,
a layer below the sources'), 404 for unknown memories, drafts or runs, 409 when the stored state
is in the way (a run already going, a source archived, changed or merged since the draft, a
reminder waiting, a core source without ``"confirm_core": true``, a revert that cannot restore
every source).
"""

from __future__ import annotations

import re
from typing import Any

from aiohttp import web

from pawwake.app_faces import MEMORY_WRITES, database_of, face_of, settings_of
from pawwake.memory.consolidation import drafts as consolidate
from pawwake.memory.consolidation import merge
from pawwake.memory.consolidation.merge import MergeRequest
from pawwake.memory.fields import (
    FieldError,
    parse_bool,
    parse_content,
    parse_event_date,
    parse_ids,
    parse_importance,
    parse_int,
    parse_query_int,
    parse_title,
    reject_unknown,
    require_object,
)
from pawwake.routes.memories import memory_id, read_json

MERGE_FIELDS = ("source_ids", "content", "title", "importance", "layer", "draft_id",
                "expected", "confirm_core")
_FINGERPRINT = re.compile(r"^[0-9a-f]{32}$")


async def start(request: web.Request) -> web.Response:
    """Queue a draft run for ``{"ids": [...]}`` or ``{"date_from", "date_to"}`` (202)."""
    body = require_object(await read_json(request))
    if "ids" in body and ("date_from" in body or "date_to" in body):
        raise FieldError(None, "Send either 'ids' or 'date_from' and 'date_to', not both.",
                         "ambiguous_request")
    if "ids" in body:
        reject_unknown(body, ("ids",))
        ids = parse_ids(body["ids"])
        if len(ids) < 2:
            raise FieldError("ids", "Select at least 2 memories to consolidate.",
                             "too_few_memories")
        started = await consolidate.start_selection(face_of(request, MEMORY_WRITES), ids,
                                                    settings=await settings_of(request))
    elif "date_from" in body or "date_to" in body:
        reject_unknown(body, ("date_from", "date_to"))
        for name in ("date_from", "date_to"):
            if body.get(name) is None:
                raise FieldError(name, f"'{name}' is required (YYYY-MM-DD).", "missing_field")
        date_from = parse_event_date(body["date_from"], "date_from")
        date_to = parse_event_date(body["date_to"], "date_to")
        assert date_from is not None and date_to is not None  # both present: checked above
        started = await consolidate.start_range(face_of(request, MEMORY_WRITES), date_from, date_to,
                                                settings=await settings_of(request))
    else:
        reject_unknown(body, ("ids", "date_from", "date_to"))
        raise FieldError(None, "Send 'ids' (at least 2 memories) or 'date_from' and 'date_to'.",
                         "missing_field")
    status_url = request.app.router["api_consolidate_status"].url_for()
    return web.json_response({**started, "status_url": str(status_url)}, status=202)


async def status(request: web.Request) -> web.Response:
    job_id = parse_query_int(request.query.get("job_id"), "job_id", None, 1, 2 ** 63 - 1)
    return web.json_response(await consolidate.status(database_of(request), job_id))


async def cancel(request: web.Request) -> web.Response:
    return web.json_response(await consolidate.cancel(database_of(request)))


def parse_merge(body: Any) -> MergeRequest:
    body = require_object(body)
    reject_unknown(body, MERGE_FIELDS)
    wanted = MergeRequest()
    if body.get("draft_id") is not None:
        if not isinstance(body["draft_id"], str) or not body["draft_id"].strip():
            raise FieldError("draft_id", "'draft_id' must be a draft id string such as '12-3'.")
        wanted.draft_id = body["draft_id"].strip()
    if body.get("expected") is not None:
        if wanted.draft_id is not None:
            raise FieldError("expected", "Send 'draft_id' or 'expected', not both: a draft "
                             "carries its own fingerprint.", "ambiguous_request")
        if not isinstance(body["expected"], str) or not _FINGERPRINT.match(body["expected"]):
            raise FieldError("expected", "'expected' must be a draft's 32-character "
                             "fingerprint.")
        wanted.expected = body["expected"]
    if "source_ids" in body:
        wanted.source_ids = parse_ids(body["source_ids"], "source_ids")
    if "content" in body:
        wanted.content = parse_content(body["content"])
    if "title" in body:
        wanted.title, wanted.title_given = parse_title(body["title"]), True
    if "importance" in body:
        wanted.importance = parse_importance(body["importance"])
    if "layer" in body:
        wanted.layer = parse_int(body["layer"], "layer", 2, 3)
    if "confirm_core" in body:
        wanted.confirm_core = parse_bool(body["confirm_core"], "confirm_core")
    return wanted


async def merge_memories(request: web.Request) -> web.Response:
    """Confirm a draft (``draft_id``, fields optional: the draft's are used) or merge chosen
    memories (``source_ids`` and ``content`` required). 201 with the new memory."""
    wanted = parse_merge(await read_json(request))
    merged = await merge.merge_memories(face_of(request, MEMORY_WRITES), wanted,
                                        settings=await settings_of(request))
    return web.json_response(merged, status=201)


async def revert(request: web.Request) -> web.Response:
    return web.json_response(await merge.revert_merge(face_of(request, MEMORY_WRITES), memory_id(request),
                                                      settings=await settings_of(request)))


async def sources(request: web.Request) -> web.Response:
    return web.json_response(await merge.sources_of(database_of(request), memory_id(request),
                                                    settings=await settings_of(request)))


async def core_candidates(request: web.Request) -> web.Response:
    limit = parse_query_int(request.query.get("limit"), "limit", merge.CANDIDATE_LIMIT, 1,
                            merge.CANDIDATE_LIMIT)
    assert limit is not None
    candidates = await merge.core_candidates(database_of(request), limit)
    return web.json_response({"candidates": candidates, "count": len(candidates)})


def setup(app: web.Application) -> None:
    add = app.router
    add.add_post("/memories/consolidate", start, name="api_consolidate")
    add.add_get("/memories/consolidate/status", status, name="api_consolidate_status")
    add.add_post("/memories/consolidate/cancel", cancel, name="api_consolidate_cancel")
    add.add_post("/memories/merge", merge_memories, name="api_memories_merge")
    add.add_get("/memories/core-candidates", core_candidates,
                name="api_memories_core_candidates")
    add.add_post(r"/memories/{id:[0-9]{1,18}}/revert-merge", revert, name="api_memory_revert_merge")
    add.add_get(r"/memories/{id:[0-9]{1,18}}/sources", sources, name="api_memory_sources")
