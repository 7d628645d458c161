"""Typed application keys: every piece of shared state on the app has one here."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import aiohttp
from aiohttp import web

if TYPE_CHECKING:
    from pawwake.api_error import ApiError
    from pawwake.chat.pipeline import ChatResources
    from pawwake.chat.recall.vectors import MessageVectors
    from pawwake.chat.turn_spool import TurnSpool
    from pawwake.database import Database
    from pawwake.jobs import JobRunner
    from pawwake.live_settings import RuntimeConfig
    from pawwake.llm.embeddings import Embedder
    from pawwake.llm.models import ModelCatalog
    from pawwake.llm.upstream_health import UpstreamHealth
    from pawwake.memory.vectors import VectorStore
    from pawwake.search.term_stats import TermStats
    from pawwake.settings import Settings
    from pawwake.tasks import BackgroundTasks

SETTINGS: web.AppKey[Settings] = web.AppKey("settings")  # the start-up snapshot (env + defaults)
CONFIG: web.AppKey[RuntimeConfig] = web.AppKey("config")
DATABASE: web.AppKey[Database | None] = web.AppKey("database")
HTTP: web.AppKey[aiohttp.ClientSession] = web.AppKey("http")
TASKS: web.AppKey[BackgroundTasks] = web.AppKey("tasks")
JOBS: web.AppKey[JobRunner] = web.AppKey("jobs")
MODELS: web.AppKey[ModelCatalog] = web.AppKey("models")  # provider model lists, cached
CHAT: web.AppKey[ChatResources] = web.AppKey("chat")  # persona file, steps, pending stores
EMBEDDER: web.AppKey[Embedder] = web.AppKey("embedder")  # embedding provider + query cache
VECTORS: web.AppKey[VectorStore] = web.AppKey("vectors")  # memory vector search (pgvector/numpy)
TERM_STATS: web.AppKey[TermStats] = web.AppKey("term_stats")  # keyword IDF statistics
RECALL_VECTORS: web.AppKey[MessageVectors] = web.AppKey("recall_vectors")  # message vectors
UPSTREAM_HEALTH: web.AppKey[UpstreamHealth] = web.AppKey("upstream_health")  # last failure
TURN_SPOOL: web.AppKey[TurnSpool] = web.AppKey("turn_spool")  # turns waiting for the database
# Per program sub-app (/api, /v1, /v1/messages, /mcp): how its error middleware renders a
# refusal, and whether CORS admits only origins listed by name (MCP's rule).
ERROR_ENVELOPE: web.AppKey[Callable[[ApiError], web.Response]] = web.AppKey("error_envelope")
CORS_NAMED_ORIGINS_ONLY: web.AppKey[bool] = web.AppKey("cors_named_origins_only")
