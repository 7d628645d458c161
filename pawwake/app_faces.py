"""How the HTTP layer reaches what a handler works with: each face and shared part under its
typed app key on the root app (set by the assembly, ``services.py`` ``install_faces``), and the
settings in force read once per request.

A handler asks for the one face its feature declares (``face_of(request, MEMORY_WRITES)``);
no handler is given every shared object at once.
"""

from __future__ import annotations

from typing import TypeVar

from aiohttp import web

from pawwake.chat.resources import ChatResources, RelayParts
from pawwake.conversations.turn_spool import TurnSpool
from pawwake.conversations.turn_store import TurnStore
from pawwake.database import Database, require_database
from pawwake.jobs import JobRunner
from pawwake.live_settings import RuntimeConfig
from pawwake.llm.http import HttpClient
from pawwake.llm.models import ModelCatalog
from pawwake.llm.upstream_health import UpstreamHealth
from pawwake.mcp.tools import McpTools
from pawwake.memory.faces import MemoryEmbedding, MemoryLearning, MemorySearch, MemoryWrites
from pawwake.recall.faces import ConversationRecall
from pawwake.relay.trial import TrialParts
from pawwake.settings import Settings

T = TypeVar("T")

# The start-up snapshot (environment + defaults): what is read once at start (secrets, limits).
STARTUP_SETTINGS: web.AppKey[Settings] = web.AppKey("startup_settings")
CONFIG: web.AppKey[RuntimeConfig] = web.AppKey("config")  # the settings in force now
DATABASE: web.AppKey[Database | None] = web.AppKey("database")  # None: DATABASE_ENABLED=false
MEMORY_WRITES: web.AppKey[MemoryWrites] = web.AppKey("memory_writes")
MEMORY_SEARCH: web.AppKey[MemorySearch] = web.AppKey("memory_search")
MEMORY_LEARNING: web.AppKey[MemoryLearning] = web.AppKey("memory_learning")
MEMORY_EMBEDDING: web.AppKey[MemoryEmbedding] = web.AppKey("memory_embedding")
RECALL: web.AppKey[ConversationRecall] = web.AppKey("conversation_recall")
MCP: web.AppKey[McpTools] = web.AppKey("mcp_tools")
# Shared parts a page or route shows or administers itself (status, jobs, settings).
JOBS: web.AppKey[JobRunner] = web.AppKey("jobs")
TURN_STORE: web.AppKey[TurnStore] = web.AppKey("turn_store")  # sidecar ingest
TURN_SPOOL: web.AppKey[TurnSpool] = web.AppKey("turn_spool")
HTTP: web.AppKey[HttpClient] = web.AppKey("http")
MODELS: web.AppKey[ModelCatalog] = web.AppKey("models")  # provider model lists, cached
UPSTREAM_HEALTH: web.AppKey[UpstreamHealth] = web.AppKey("upstream_health")
# The chat resources (the settings page reads the persona file in force from them).
CHAT: web.AppKey[ChatResources] = web.AppKey("chat")
TRIAL: web.AppKey[TrialParts] = web.AppKey("trial")  # the try-it page's turn
RELAY: web.AppKey[RelayParts] = web.AppKey("relay")  # a chat, Messages or Responses turn


def face_of(where: web.Request | web.Application, key: web.AppKey[T]) -> T:
    """The root app's value under ``key``, from a request (root app or sub-app alike) or the
    root app."""
    if isinstance(where, web.Application):
        return where[key]
    return where.config_dict[key]


def database_of(where: web.Request | web.Application) -> Database:
    """The database for a route that cannot work without it (503 when it is turned off)."""
    return require_database(face_of(where, DATABASE))


_SETTINGS_NOW: web.RequestKey[Settings] = web.RequestKey("settings_now")


async def settings_of(request: web.Request) -> Settings:
    """The settings for this request: read once, at its first use, and the same snapshot for
    the rest of it (a dashboard save meanwhile applies from the next request)."""
    settings = request.get(_SETTINGS_NOW)
    if settings is None:
        settings = await face_of(request, CONFIG).fresh()
        request[_SETTINGS_NOW] = settings
    return settings
