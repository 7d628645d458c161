"""The assembly: every shared object built once in ``create_app``, and each feature's face.

Every object is constructed when the app is built, so its field is typed as what it is; the
start-up contexts only open and close them (the database connects, the spool reads its folder,
the workers start). The one exception is the HTTP client, which aiohttp can only create inside
a running event loop: ``client`` (``llm/http.HttpClient``) answers once the HTTP context has
opened it.

From these parts the object builds each feature's face, a frozen dataclass with exactly the
parts that feature works with (``MemorySearch``, ``ConversationRecall``, the chat steps...), and
``install_faces`` puts them under their app keys (``app_faces.py``) for the HTTP layer. Nothing
below the assembly is handed this object whole; ``services_of`` is for the assembly and tests.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import aiohttp
from aiohttp import web

from pawwake import app_faces
from pawwake.chat.memory_step import MemoryStepParts
from pawwake.chat.pipeline import chat_steps
from pawwake.chat.resources import ChatFlow, ChatResources, RelayParts
from pawwake.conversations.turn_spool import FOLDER as SPOOL_FOLDER
from pawwake.conversations.turn_spool import TurnSpool
from pawwake.conversations.turn_store import TurnStore
from pawwake.conversations.turn_writer import TurnWriting, store_incomplete, turn_writer
from pawwake.database import Database
from pawwake.jobs import JobRunner
from pawwake.live_settings import RuntimeConfig
from pawwake.llm.embeddings import Embedder
from pawwake.llm.http import HttpClient
from pawwake.llm.models import ModelCatalog
from pawwake.llm.upstream_health import UpstreamHealth
from pawwake.mcp.tools import McpTools
from pawwake.memory.faces import MemoryEmbedding, MemoryLearning, MemorySearch, MemoryWrites
from pawwake.memory.resources import embedding_usage
from pawwake.memory.vectors import VectorStore
from pawwake.partition.step import PartitionParts
from pawwake.protocols.anthropic.pipeline import messages_steps
from pawwake.protocols.responses.prepare import responses_steps
from pawwake.recall.faces import ConversationRecall
from pawwake.recall.vectors import MessageVectors
from pawwake.relay.trial import TrialParts
from pawwake.replies_in_flight import RepliesInFlight
from pawwake.search.background import References
from pawwake.search.term_stats import CONVERSATIONS, MEMORIES, TermStats
from pawwake.settings import Settings
from pawwake.tasks import BackgroundTasks

MEGABYTE = 1024 * 1024


@dataclass(eq=False)
class Services:
    """Every shared object, one typed field each, and the faces built from them."""

    settings: Settings  # the start-up snapshot (environment + defaults); see ``config`` for now
    config: RuntimeConfig  # the settings in force now (start-up values + dashboard saves)
    database: Database | None  # None only with DATABASE_ENABLED=false; may connect late
    jobs: JobRunner
    tasks: BackgroundTasks
    embedder: Embedder
    vectors: VectorStore  # memory vector search (pgvector/numpy)
    term_stats: TermStats  # keyword IDF statistics of the memories
    message_term_stats: TermStats  # ... and of the conversation messages recall searches
    references: References  # the semantic background's vectors per embedding model
    recall_vectors: MessageVectors  # conversation message vectors
    turn_spool: TurnSpool  # turns waiting for the database
    upstream_health: UpstreamHealth  # the provider's last failure
    models: ModelCatalog  # provider model lists, cached
    chat: ChatResources  # persona file, chat steps, clock, stores in flight (chat/resources.py)
    in_flight: RepliesInFlight  # chat turns running now, for a graceful shutdown
    client: HttpClient = field(default_factory=HttpClient, repr=False)
    # Each feature's face: the parts above it works with, no more (built with the object).
    memory_writes: MemoryWrites = field(init=False, repr=False)
    memory_search: MemorySearch = field(init=False, repr=False)
    memory_learning: MemoryLearning = field(init=False, repr=False)
    memory_embedding: MemoryEmbedding = field(init=False, repr=False)
    recall: ConversationRecall = field(init=False, repr=False)
    mcp: McpTools = field(init=False, repr=False)
    turn_store: TurnStore = field(init=False, repr=False)
    turn_writing: TurnWriting = field(init=False, repr=False)
    flow: ChatFlow = field(init=False, repr=False)
    relay: RelayParts = field(init=False, repr=False)
    trial: TrialParts = field(init=False, repr=False)

    def __post_init__(self) -> None:
        data_dir = self.settings.PAWWAKE_DATA_DIR
        self.memory_writes = MemoryWrites(self.database, self.jobs, self.config, data_dir,
                                          self.embedder, self.vectors, self.tasks)
        self.memory_search = MemorySearch(self.database, self.embedder, self.vectors,
                                          self.term_stats, self.references, data_dir)
        self.memory_learning = MemoryLearning(self.memory_writes, self.memory_search,
                                              self.config, self.client, self.upstream_health)
        self.memory_embedding = MemoryEmbedding(self.database, self.jobs, self.config,
                                                self.embedder, self.vectors)
        self.recall = ConversationRecall(self.database, self.jobs, self.tasks, self.config,
                                         self.embedder, self.vectors, self.recall_vectors,
                                         data_dir, self.message_term_stats)
        self.mcp = McpTools(self.memory_search, self.memory_writes, self.recall, self.database)
        # Each protocol's chat steps, each bound to its own parts.
        partition = PartitionParts(self.database is not None, self.client,
                                   self.upstream_health, self.chat.pending)
        memory = MemoryStepParts(self.memory_search, self.tasks)
        self.chat.steps = chat_steps(partition, memory, self.recall)
        self.chat.messages_steps = messages_steps(partition, memory, self.recall)
        self.chat.responses_steps = responses_steps(memory)
        self.turn_store = TurnStore(self.database, self.config, self.recall, self.jobs)
        self.turn_writing = TurnWriting(self.turn_store, self.turn_spool, self.chat.pending)
        self.flow = ChatFlow(self.database, self.tasks, self.chat,
                             partial(turn_writer, self.turn_writing),
                             partial(store_incomplete, self.turn_writing))
        self.relay = RelayParts(self.flow, self.client, self.upstream_health, self.config,
                                self.in_flight)
        self.trial = TrialParts(self.flow, self.client, self.upstream_health)

    def open_http(self, session: aiohttp.ClientSession) -> None:
        """The HTTP client, once ``open_http_client`` opened it: for the faces and the embedder."""
        self.client.open(session)
        self.embedder.use_http(session)


# The whole object, for the assembly and tests only (``services_of``).
SERVICES: web.AppKey[Services] = web.AppKey("services")


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
        term_stats=TermStats(MEMORIES),
        message_term_stats=TermStats(CONVERSATIONS),
        references=References(),
        recall_vectors=MessageVectors(),
        turn_spool=TurnSpool(Path(settings.PAWWAKE_DATA_DIR) / SPOOL_FOLDER,
                             settings.TURN_SPOOL_MAX_MB * MEGABYTE),
        upstream_health=UpstreamHealth(),
        models=ModelCatalog(),
        chat=ChatResources(),
        in_flight=RepliesInFlight(),
    )


def install_faces(app: web.Application, services: Services) -> None:
    """Put each face and shared part the HTTP layer reaches under its key (``app_faces.py``)."""
    app[SERVICES] = services
    app[app_faces.STARTUP_SETTINGS] = services.settings
    app[app_faces.CONFIG] = services.config
    app[app_faces.DATABASE] = services.database
    app[app_faces.MEMORY_WRITES] = services.memory_writes
    app[app_faces.MEMORY_SEARCH] = services.memory_search
    app[app_faces.MEMORY_LEARNING] = services.memory_learning
    app[app_faces.MEMORY_EMBEDDING] = services.memory_embedding
    app[app_faces.RECALL] = services.recall
    app[app_faces.MCP] = services.mcp
    app[app_faces.JOBS] = services.jobs
    app[app_faces.TURN_STORE] = services.turn_store
    app[app_faces.TURN_SPOOL] = services.turn_spool
    app[app_faces.HTTP] = services.client
    app[app_faces.MODELS] = services.models
    app[app_faces.UPSTREAM_HEALTH] = services.upstream_health
    app[app_faces.CHAT] = services.chat
    app[app_faces.TRIAL] = services.trial
    app[app_faces.RELAY] = services.relay


def services_of(where: web.Request | web.Application) -> Services:
    """The app's services, from a request (root app or sub-app alike) or the root app: for
    the assembly and tests; everything else reaches its face (``app_faces.py``)."""
    if isinstance(where, web.Application):
        return where[SERVICES]
    return where.config_dict[SERVICES]
