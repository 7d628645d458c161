"""The gateway's shared resources as one typed object, built once in ``create_app``.

Every object is constructed when the app is built, so its field is typed as what it is; the
start-up contexts only open and close them (the database connects, the spool reads its folder,
the workers start). The one exception is the HTTP client, which aiohttp can only create inside
a running event loop: ``http`` answers once the HTTP context has opened it.

Routes, the dashboard and assembly reach the object with ``services_of(request)`` (also from a
sub-app) or ``services_of(app)``; the services below them take the parts they use. A request
reads the settings in force once, with ``settings_of(request)``, and passes that snapshot down;
a background job reads them once when it starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
from aiohttp import web

from pawwake import keys
from pawwake.chat.pipeline import CHAT_STEPS
from pawwake.chat.recall.vectors import MessageVectors
from pawwake.chat.resources import ChatResources
from pawwake.chat.turn_spool import FOLDER as SPOOL_FOLDER
from pawwake.chat.turn_spool import TurnSpool
from pawwake.database import Database, require_database
from pawwake.jobs import JobRunner
from pawwake.live_settings import RuntimeConfig
from pawwake.llm.embeddings import Embedder
from pawwake.llm.models import ModelCatalog
from pawwake.llm.upstream_health import UpstreamHealth
from pawwake.memory.resources import embedding_usage
from pawwake.memory.vectors import VectorStore
from pawwake.replies_in_flight import RepliesInFlight
from pawwake.search.background import References
from pawwake.search.term_stats import TermStats
from pawwake.settings import Settings
from pawwake.tasks import BackgroundTasks

MEGABYTE = 1024 * 1024


@dataclass(eq=False)
class Services:
    """What the app keys used to hold, one typed field each."""

    settings: Settings  # the start-up snapshot (environment + defaults); see ``config`` for now
    config: RuntimeConfig  # the settings in force now (start-up values + dashboard saves)
    database: Database | None  # None only with DATABASE_ENABLED=false; may connect late
    jobs: JobRunner
    tasks: BackgroundTasks
    embedder: Embedder
    vectors: VectorStore  # memory vector search (pgvector/numpy)
    term_stats: TermStats  # keyword IDF statistics
    references: References  # the semantic background's vectors per embedding model
    recall_vectors: MessageVectors  # conversation message vectors
    turn_spool: TurnSpool  # turns waiting for the database
    upstream_health: UpstreamHealth  # the provider's last failure
    models: ModelCatalog  # provider model lists, cached
    chat: ChatResources  # persona file, chat steps, clock, stores in flight (chat/resources.py)
    in_flight: RepliesInFlight  # chat turns running now, for a graceful shutdown
    _http: aiohttp.ClientSession | None = field(default=None, repr=False)

    @property
    def http(self) -> aiohttp.ClientSession:
        """The one shared client for upstream calls (opened by ``open_http_client``)."""
        if self._http is None:
            raise RuntimeError("the HTTP client opens with the app; it is not open now")
        return self._http

    def open_http(self, session: aiohttp.ClientSession) -> None:
        self._http = session
        self.embedder.use_http(session)

    def require_database(self, code: str = "database_disabled") -> Database:
        """The database, or the one 503 error (``DatabaseUnavailable`` with ``code``) when it
        is turned off; reading its ``pool`` before it connects is a 503 too."""
        return require_database(self.database, code)


def build_services(settings: Settings) -> Services:
    """Construct every shared object for ``settings``; nothing is opened here."""
    database = None
    if settings.DATABASE_ENABLED:
        database = Database("external" if settings.DATABASE_URL else "embedded")
    return Services(
        settings=settings,
        config=RuntimeConfig(settings),
        database=database,
        jobs=JobRunner(database, workers=settings.JOB_WORKERS),
        tasks=BackgroundTasks(),
        embedder=Embedder(None, usage=embedding_usage(database)),
        vectors=VectorStore(),
        term_stats=TermStats(),
        references=References(),
        recall_vectors=MessageVectors(),
        turn_spool=TurnSpool(Path(settings.PAWWAKE_DATA_DIR) / SPOOL_FOLDER,
                             settings.TURN_SPOOL_MAX_MB * MEGABYTE),
        upstream_health=UpstreamHealth(),
        models=ModelCatalog(),
        chat=ChatResources(steps=CHAT_STEPS),
        in_flight=RepliesInFlight(),
    )


def services_of(where: web.Request | web.Application) -> Services:
    """The app's services, from a request (root app or sub-app alike) or the root app."""
    if isinstance(where, web.Application):
        return where[keys.SERVICES]
    return where.config_dict[keys.SERVICES]


def database_of(where: web.Request | web.Application) -> Database:
    """The database for a route that cannot work without it (503 when it is turned off)."""
    return services_of(where).require_database()


_SETTINGS_NOW: web.RequestKey[Settings] = web.RequestKey("settings_now")


async def settings_of(request: web.Request) -> Settings:
    """The settings for this request: read once, at its first use, and the same snapshot for
    the rest of it (a dashboard save meanwhile applies from the next request)."""
    settings = request.get(_SETTINGS_NOW)
    if settings is None:
        settings = await services_of(request).config.fresh()
        request[_SETTINGS_NOW] = settings
    return settings
