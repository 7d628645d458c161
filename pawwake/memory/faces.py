"""What each part of memory works with, named: the faces the assembly (``services.py``) builds
and hands to routes, jobs and the chat flow's memory step.

A function that takes a face declares what it touches; nothing below the assembly is handed
every shared object at once.
"""

from __future__ import annotations

from dataclasses import dataclass

from pawwake.database import Database
from pawwake.jobs import JobRunner
from pawwake.live_settings import RuntimeConfig
from pawwake.llm.embeddings import Embedder
from pawwake.llm.http import HttpClient
from pawwake.llm.upstream_health import UpstreamHealth
from pawwake.memory.vectors import VectorStore
from pawwake.search.background import References
from pawwake.search.term_stats import TermStats


@dataclass(frozen=True)
class MemoryWrites:
    """Writing memories: their rows, the job runner woken for the vectors (and descriptions) a
    write queues, the settings in force (whether the memory model describes new rows), and
    the data folder the tokenizer cuts index terms with."""

    database: Database | None  # None only with DATABASE_ENABLED=false
    jobs: JobRunner
    config: RuntimeConfig
    data_dir: str


@dataclass(frozen=True)
class MemorySearch:
    """Searching memories: keywords with their statistics, and vectors from the embedder, the
    vector store and the semantic background they are measured against."""

    database: Database | None
    embedder: Embedder
    vectors: VectorStore
    term_stats: TermStats
    references: References
    data_dir: str


@dataclass(frozen=True)
class MemoryLearning:
    """The memory model's work (extraction, consolidation drafts, scoring imported lines):
    writes and search as above, the settings in force, the HTTP client and the provider's
    health that every own model call reports to."""

    writes: MemoryWrites
    search: MemorySearch
    config: RuntimeConfig
    http: HttpClient
    upstream_health: UpstreamHealth


@dataclass(frozen=True)
class MemoryEmbedding:
    """Memory vectors: the backfill and the embedding job (embedder, vector store, the
    settings in force, the job runner)."""

    database: Database | None
    jobs: JobRunner
    config: RuntimeConfig
    embedder: Embedder
    vectors: VectorStore
