"""Application assembly: create_app(settings) wires resources, middlewares and routes."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager

from aiohttp import web

from pawwake.auth import warn_if_open
from pawwake.blas_threads import set_blas_threads
from pawwake.config_problems import configuration_problems
from pawwake.conversations.turn_spool import open_turn_spool
from pawwake.conversations.turn_writer import spooled_turn_writer
from pawwake.dashboard import setup_dashboard
from pawwake.database import open_database, stop_connecting
from pawwake.job_kinds import job_handlers
from pawwake.jobs import running_jobs
from pawwake.llm.http import open_http_client
from pawwake.memory.resources import open_embedder
from pawwake.recall.vectors import warming_message_vectors
from pawwake.request_statements import bounded_statements_middleware
from pawwake.routes import setup_routes
from pawwake.services import MEGABYTE, Services, build_services, install_faces
from pawwake.settings import Settings
from pawwake.tasks import draining
from pawwake.upgrade.adopt import finish_adoption

log = logging.getLogger(__name__)

CleanupContext = Callable[[web.Application], AsyncIterator[None]]
Resource = Callable[[], AbstractAsyncContextManager[None]]


def create_app(settings: Settings) -> web.Application:
    """Build the whole gateway for ``settings``: every shared object is built here (see
    ``pawwake.services``) and opens in app start-up, in order."""
    set_blas_threads(1)  # the vector index's scans: one BLAS thread each (blas_threads)
    # /v1, /api, /mcp and /dashboard are sub-apps with their own middlewares (routes/, sub_apps.py).
    app = web.Application(client_max_size=settings.MAX_REQUEST_MB * MEGABYTE,
                          middlewares=[bounded_statements_middleware])
    services = build_services(settings)
    install_faces(app, services)
    # Opened in this order, closed in reverse: background work drains before its resources go.
    for resource in _resources(services):
        app.cleanup_ctx.append(_while_app_runs(resource))
    app.on_shutdown.append(lambda _app: stop_connecting(services.database))
    # The listening socket is closed by now: replies in flight get their grace, then an end.
    app.on_shutdown.append(
        lambda _app: services.in_flight.wind_down(settings.SHUTDOWN_GRACE_SECONDS))
    warn_if_open(settings.GATEWAY_SECRET)
    for problem in configuration_problems(settings):
        log.warning("configuration: %s", problem.english())
    setup_routes(app)
    for kind, handler in job_handlers(learning=services.memory_learning,
                                      writes=services.memory_writes,
                                      embedding=services.memory_embedding,
                                      recall=services.recall).items():
        services.jobs.register(kind, handler)
    setup_dashboard(app)
    return app


def _resources(s: Services) -> list[Resource]:
    """What opens at start-up and closes at shutdown, in opening order."""
    return [
        lambda: open_database(s.database, s.settings, s.config, finish_adoption),
        lambda: open_http_client(s.settings, s.open_http),
        lambda: open_embedder(s.settings, s.config, s.database, s.embedder, s.vectors),
        lambda: warming_message_vectors(s.recall_vectors, s.config, s.database, s.embedder,
                                        s.vectors),
        lambda: running_jobs(s.jobs, s.settings.JOB_WORKERS),
        lambda: open_turn_spool(s.turn_spool, s.database, spooled_turn_writer(s.turn_writing)),
        lambda: draining(s.tasks, s.jobs),
    ]


def _while_app_runs(resource: Resource) -> CleanupContext:
    """A cleanup context (aiohttp's start-up/shutdown pair) from an async context manager."""
    async def context(_app: web.Application) -> AsyncIterator[None]:
        async with resource():
            yield
    return context
