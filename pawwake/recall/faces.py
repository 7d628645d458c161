"""What conversation recall works with, named: the face the assembly (``services.py``) builds
for searching stored conversations and keeping their indexes current."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from pawwake.database import Database
from pawwake.jobs import JobRunner
from pawwake.live_settings import RuntimeConfig
from pawwake.llm.embeddings import Embedder, Provenance
from pawwake.recall.vectors import MessageVectors
from pawwake.settings import Settings
from pawwake.tasks import BackgroundTasks


class VectorBackend(Protocol):
    """What recall asks of the gateway's vector store (memory's ``VectorStore``): which
    backend serves a search, and pgvector's index on the message vectors."""

    def backend(self, settings: Settings, database: Database, provenance: Provenance) -> str:
        ...

    async def ensure_hnsw_index(self, database: Database, settings: Settings,
                                provenance: Provenance, table: str = ...) -> bool:
        ...


@dataclass(frozen=True)
class ConversationRecall:
    """Recall's parts: stored messages (database), their keyword terms (the data folder's
    tokenizer), their vectors (embedder, ``recall_vectors``; ``vectors`` decides the backend
    and builds pgvector's index), the embedding job (runner, the settings in force), and the
    background tasks that build a missing index."""

    database: Database | None
    jobs: JobRunner
    tasks: BackgroundTasks
    config: RuntimeConfig
    embedder: Embedder
    vectors: VectorBackend
    recall_vectors: MessageVectors
    data_dir: str
