"""GET / : a public health summary with no secrets."""

from __future__ import annotations

from aiohttp import web

from pawwake import __version__
from pawwake.app_faces import DATABASE, TURN_SPOOL, face_of, settings_of
from pawwake.database import connected_database, database_state
from pawwake.search.vector_backend import configured_backend


async def health(request: web.Request) -> web.Response:
    settings = await settings_of(request)
    state = database_state(face_of(request, DATABASE))
    configured = face_of(request, DATABASE)
    database = connected_database(configured)
    return web.json_response({
        # Still 200 while the database is away: the gateway forwards chat and heals itself,
        # so a host's health check must not restart it for that.
        "status": "running" if state in ("ready", "disabled") else "degraded",
        "name": "Pawwake",
        "version": __version__,
        "database": state,
        "database_kind": configured.kind if configured is not None else None,
        "vectors": configured_backend(settings, database.pgvector) if database else None,
        "memory": bool(database and settings.MEMORY_ENABLED),
        "partition": bool(database and settings.CACHE_PARTITION_ENABLED),
        "recall": bool(database and settings.CONVERSATION_RECALL_ENABLED),
        "turn_spool": face_of(request, TURN_SPOOL).status(),
    })


def setup(app: web.Application) -> None:
    app.router.add_get("/", health, name="health")
