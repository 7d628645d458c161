"""Application assembly: create_app(settings) wires resources, middlewares and routes."""

from __future__ import annotations

from aiohttp import web

from pawwake import keys
from pawwake.auth import api_auth_middleware, warn_if_open
from pawwake.chat.pipeline import ChatResources
from pawwake.chat.recall.vectors import recall_vectors_ctx
from pawwake.chat.turn_spool import turn_spool_ctx
from pawwake.cors import cors_preflight_middleware, setup_cors
from pawwake.dashboard import setup_dashboard
from pawwake.database import database_ctx, stop_connecting
from pawwake.job_kinds import register_job_handlers
from pawwake.jobs import JobRunner, jobs_ctx
from pawwake.live_settings import RuntimeConfig
from pawwake.llm.http import http_client_ctx
from pawwake.memory.resources import embedder_ctx
from pawwake.middlewares import error_middleware
from pawwake.protocols.responses import route as responses_route
from pawwake.routes import setup_routes
from pawwake.settings import Settings
from pawwake.tasks import tasks_ctx

MEGABYTE = 1024 * 1024


def create_app(settings: Settings) -> web.Application:
    """Build the whole gateway for ``settings``; resources open in app start-up, in order."""
    app = web.Application(client_max_size=settings.MAX_REQUEST_MB * MEGABYTE,
                          middlewares=[cors_preflight_middleware, error_middleware,
                                       api_auth_middleware])
    app[keys.SETTINGS] = settings
    app[keys.CONFIG] = RuntimeConfig(settings)
    app[keys.JOBS] = JobRunner(app, workers=settings.JOB_WORKERS)
    app[keys.CHAT] = ChatResources()  # the persona file; the steps are chat/pipeline.py's
    # Opened in this order, closed in reverse: background work drains before its resources go.
    app.cleanup_ctx.append(database_ctx)
    app.cleanup_ctx.append(http_client_ctx)
    app.cleanup_ctx.append(embedder_ctx)
    app.cleanup_ctx.append(recall_vectors_ctx)
    app.cleanup_ctx.append(jobs_ctx)
    app.cleanup_ctx.append(turn_spool_ctx)
    app.cleanup_ctx.append(tasks_ctx)
    app.on_shutdown.append(stop_connecting)
    warn_if_open(settings.GATEWAY_SECRET)
    setup_cors(app)
    setup_routes(app)
    responses_route.setup(app)
    register_job_handlers(app)
    setup_dashboard(app)
    return app
