"""GET / : a public health summary with no secrets."""

from __future__ import annotations

from aiohttp import web

from pawwake import __version__, keys
from pawwake.chat.turn_spool import spool_status
from pawwake.database import connected_database, database_state


async def health(request: web.Request) -> web.Response:
    settings = await request.app[keys.CONFIG].fresh()
    state = database_state(request.app)
    database = connected_database(request.app)
    return web.json_response({
        "status": "running",
        "name": "Pawwake",
        "version": __version__,
        "database": state,
        "database_kind": request.app[keys.DATABASE].kind if state != "disabled" else None,
        "vectors": ("pgvector" if database.pgvector else "numpy") if database else None,
        "memory": bool(database and settings.MEMORY_ENABLED),
        "partition": bool(database and settings.CACHE_PARTITION_ENABLED),
        "recall": bool(database and settings.CONVERSATION_RECALL_ENABLED),
        "turn_spool": spool_status(request.app),
    })


def setup(app: web.Application) -> None:
    app.router.add_get("/", health, name="health")
