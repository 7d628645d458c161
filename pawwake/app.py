"""Application assembly: create_app(settings) wires resources, middlewares and routes."""

from __future__ import annotations

from aiohttp import web

from pawwake import keys
from pawwake.auth import warn_if_open
from pawwake.chat.pipeline import ChatResources
from pawwake.chat.recall.vectors import recall_vectors_ctx
from pawwake.chat.turn_spool import turn_spool_ctx
from pawwake.dashboard import setup_dashboard
from pawwake.database import database_ctx, stop_connecting
from pawwake.job_kinds import register_job_handlers
from pawwake.jobs import JobRunner, jobs_ctx
from pawwake.live_settings import RuntimeConfig
from pawwake.llm.http import http_client_ctx
from pawwake.llm.models import ModelCatalog
from pawwake.llm.upstream_health import UpstreamHealth
from pawwake.memory.resources import embedder_ctx
from pawwake.routes import setup_routes
from pawwake.settings import Settings
from pawwake.tasks import tasks_ctx

MEGABYTE = 1024 * 1024


def create_app(settings: Settings) -> web.Application:
    """Build the whole gateway for ``settings``; resources open in app start-up, in order."""
    # /v1, /api, /mcp and /dashboard are sub-apps with their own middlewares (routes/, sub_apps.py).
    app = web.Application(client_max_size=settings.MAX_REQUEST_MB * MEGABYTE)
    app[keys.SETTINGS] = settings
    app[keys.CONFIG] = RuntimeConfig(settings)
    app[keys.JOBS] = JobRunner(app, workers=settings.JOB_WORKERS)
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
    app[keys.CHAT] = ChatResources()  # the persona file; the steps are chat/pipeline.py's
    app[keys.UPSTREAM_HEALTH] = UpstreamHealth()
    app[keys.MODELS] = ModelCatalog()
    setup_routes(app)
    register_job_handlers(app)
    setup_dashboard(app)
    return app
