"""One memory's own page: what it says, how often and when it was injected (with the replies
that carried it), when it was a candidate left out and why, the conversation turns it was
learnt from, and its version chain."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from pawwake.app_faces import DATABASE, face_of, settings_of
from pawwake.dashboard.memories.view import LAYER_KEYS
from pawwake.dashboard.render import render
from pawwake.db import memories as db
from pawwake.db.pool import cursor
from pawwake.db.turn_injections import memory_near_misses, memory_usage
from pawwake.local_time import zone_of, zoned_minute
from pawwake.memory.describe import describing

TEMPLATE = "dashboard/memory.html"


async def memory_detail(request: web.Request) -> web.Response:
    database = face_of(request, DATABASE)
    if database is None:
        raise web.HTTPNotFound()
    memory_id = int(request.match_info["memory_id"])
    settings = await settings_of(request)
    zone = zone_of(settings)
    async with cursor(database.pool) as cur:
        memory = await db.get_memory(cur, memory_id)
        if memory is None:
            raise web.HTTPNotFound()
        chain = await db.version_chain(cur, memory_id)
        sources = await db.source_messages(cur, memory_id)
        usage = await memory_usage(cur, memory_id)
        missed = await memory_near_misses(cur, memory_id)
        cues = await db.model_cues(cur, memory_id)
    return render(request, TEMPLATE, {
        "memory": memory, "layer_key": LAYER_KEYS[int(memory["layer"])],
        "created": zoned_minute(memory["created_at"], zone),
        "reminder": zoned_minute(memory.get("remind_at"), zone),
        "usage": {**usage, "last": zoned_minute(usage["last_at"], zone),
                  "turns": [{**turn, "when": zoned_minute(turn["created_at"], zone)}
                            for turn in usage["turns"]]},
        "missed": {**missed, "turns": [{**turn, "when": zoned_minute(turn["created_at"], zone)}
                                       for turn in missed["turns"]]},
        "sources": [{**row, "when": zoned_minute(row["created_at"], zone),
                     "role_key": f"conv.role_{row['role']}"} for row in sources],
        "cues": search_cues(cues, describing(settings)),
        "chain": [{**row, "when": zoned_minute(row["created_at"], zone)} for row in chain]
        if len(chain) > 1 else [],
    })


def search_cues(cues: dict[str, Any], described: bool) -> dict[str, Any]:
    """What the memory model wrote to find this memory by (its keywords and the questions it
    answers), or why there is nothing: descriptions off, not described yet, nothing usable."""
    keywords, questions = cues["keywords"], cues["questions"]
    if keywords or questions:
        state = "written"
    elif cues["described_at"] is not None:
        state = "none"
    else:
        state = "pending" if described else "off"
    return {"state": state, "keywords": keywords, "questions": questions,
            "note_key": f"memory.cues_{state}"}


def setup(dashboard: web.Application) -> None:
    dashboard.router.add_get(r"/memories/{memory_id:[0-9]{1,18}}", memory_detail,
                             name="memory_detail")
