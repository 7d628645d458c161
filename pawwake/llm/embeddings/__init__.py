"""Text embeddings: an OpenAI-compatible API or the bundled local e5 model, chosen per setting.

Vectors come back L2-normalised float32 rows, tagged with their provenance (provider, model,
dimension) so stored vectors are never compared with vectors from another model.

- ``embedder``: the one ``Embedder`` per process: queries (cache, deadline, shedding under
  load) and passages, routed to the API or the local model;
- ``provenance``: what a vector is (``Provenance``, the provider in use, its noise floor, the
  bounded part of a stored text that is embedded) and how an embedding fails;
- ``api``: the OpenAI-compatible API (dimensions learned, clear errors);
- ``local``: the local model on its lanes; ``query_batch``: concurrent chats' queries in one
  forward pass; ``local_engine``: CPUs granted, lanes, the one engine instance;
  ``engine_memory``: memory given back after a burst.

The names most callers need are importable from here.
"""

from pawwake.llm.embeddings.api import UsageRecorder
from pawwake.llm.embeddings.embedder import Embedder
from pawwake.llm.embeddings.local_engine import LOCAL_DIM, LOCAL_MODEL
from pawwake.llm.embeddings.provenance import (
    DEFAULT_THRESHOLDS,
    EmbeddingError,
    Provenance,
    QueryEmbeddingShed,
    QueryEmbeddingTimeout,
    normalise_rows,
    passage_text,
    provider_for,
    semantic_threshold,
)

__all__ = ["DEFAULT_THRESHOLDS", "LOCAL_DIM", "LOCAL_MODEL", "Embedder", "EmbeddingError",
           "Provenance", "QueryEmbeddingShed", "QueryEmbeddingTimeout", "UsageRecorder",
           "normalise_rows", "passage_text", "provider_for", "semantic_threshold"]
