"""What a vector is: where it came from (provenance), which provider makes it, its calibrated
noise floor, unit-length rows, the bounded part of a stored text that is embedded, and how an
embedding fails.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from pawwake.settings import Settings
from pawwake.text.tokens import bounded

# Noise floor of a semantic candidate (raw cosine); admission itself is by rank within the
# query's neighbourhood (search.fusion). e5 puts unrelated texts at 0.7-0.86 and a paraphrase
# can sit at 0.80; OpenAI-style models spread lower. Pinned by a test.
DEFAULT_THRESHOLDS: Mapping[str, float] = {"api": 0.3, "local": 0.78}
# A stored text is embedded from a bounded part: e5 reads 512 tokens per window and the local
# engine averages every window of a long text (a 50k-character memory took about a minute);
# an API rejects inputs past its token limit. Head and tail, like the keyword index.
LOCAL_PASSAGE_HEAD, LOCAL_PASSAGE_TAIL = 768, 256
API_PASSAGE_HEAD, API_PASSAGE_TAIL = 3000, 1000


@dataclass(frozen=True)
class Provenance:
    """Where a vector came from; vectors of different provenance are not comparable."""

    provider: str
    model: str
    dim: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class EmbeddingError(RuntimeError):
    """The embedding provider failed; ``status`` is the HTTP status when there was one."""

    def __init__(self, message: str, status: int | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after

    @property
    def rate_limited(self) -> bool:
        return self.status == 429


class QueryEmbeddingTimeout(EmbeddingError):
    """A query's vector did not come within ``QUERY_EMBEDDING_TIMEOUT``; search by keywords."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"query embedding took longer than {seconds:g} s")
        self.seconds = seconds


class QueryEmbeddingShed(EmbeddingError):
    """Under load a query would have waited ``predicted_ms`` for the local model, past
    ``QUERY_EMBEDDING_MAX_WAIT``: it was not queued; search by keywords at once."""

    def __init__(self, predicted_ms: float, budget: float) -> None:
        super().__init__(f"this query's vector would have waited about {predicted_ms:.0f} ms"
                         f" behind others (QUERY_EMBEDDING_MAX_WAIT {budget:g} s)")
        self.predicted_ms = predicted_ms


def passage_text(text: str, provider: str) -> str:
    """The bounded part of a stored text that is embedded: its head and tail when long."""
    if provider == "local":
        head, tail = LOCAL_PASSAGE_HEAD, LOCAL_PASSAGE_TAIL
    else:
        head, tail = API_PASSAGE_HEAD, API_PASSAGE_TAIL
    return bounded(text, head, tail)


def provider_for(settings: Settings) -> str:
    """``auto`` means the API when a key is configured, else the local model."""
    choice = settings.EMBEDDING_PROVIDER
    if choice == "auto":
        return "api" if settings.EMBEDDING_API_KEY else "local"
    return str(choice)


def semantic_threshold(settings: Settings, provider: str | None = None) -> float:
    """The configured threshold, else the calibrated default of the provider in use."""
    configured = settings.MEMORY_SEMANTIC_THRESHOLD
    if configured is not None:
        return float(configured)
    return DEFAULT_THRESHOLDS[provider or provider_for(settings)]


def normalise_rows(matrix: np.ndarray) -> np.ndarray:
    """Unit-length float32 rows (zero rows stay zero)."""
    matrix = np.asarray(matrix, dtype=np.float32)
    if matrix.ndim == 1:
        matrix = matrix[None, :]
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    rows: np.ndarray = matrix / norms
    return rows
