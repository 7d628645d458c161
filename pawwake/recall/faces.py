"""What conversation recall works with, named: the face the assembly (``services.py``) builds
for searching stored conversations and keeping their indexes current."""

from __future__ import annotations

from dataclasses import dataclass

from pawwake.database import Database
from pawwake.jobs import JobRunner
from pawwake.live_settings import RuntimeConfig
from pawwake.llm.embeddings import Embedder
from pawwake.recall.vectors import MessageVectors
from pawwake.search.term_stats import TermStats
from pawwake.search.vector_backend import VectorBackend
from pawwake.tasks import BackgroundTasks


@dataclass(frozen=True)
class ConversationRecall:
    """Recall's parts: stored messages (database), their keyword terms (the data folder's
    tokenizer), their vectors (embedder, ``recall_vectors``; ``vectors`` decides the backend
    and builds pgvector's index), the embedding job (runner, the settings in force), the
    background tasks that build a missing index, and the messages' keyword statistics."""

    database: Database | None
    jobs: JobRunner
    tasks: BackgroundTasks
    config: RuntimeConfig
    embedder: Embedder
    vectors: VectorBackend
    recall_vectors: MessageVectors
    data_dir: str
    term_stats: TermStats
