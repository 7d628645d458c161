"""A chat query is handed to its lane when the search asks for it, not a loop turn later."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

from pawwake.llm.embeddings import Embedder, QueryEmbeddingTimeout
from pawwake.llm.embeddings.query_batch import QueryBatcher
from pawwake.priority_worker import PriorityWorker
from pawwake.settings import Settings
from tests.embedding_server import fake_vector


class GatedModel:
    """Deterministic vectors; "hold" keeps the lane busy until ``gate`` opens."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.gate = threading.Event()

    def embed(self, texts: list[str]) -> np.ndarray:
        if texts == ["hold"]:
            self.gate.wait()
        self.calls.append(list(texts))
        return np.asarray([fake_vector(text, 16) for text in texts], dtype=np.float32)


def embedder_with(model: GatedModel) -> Embedder:
    embedder = Embedder(http=None)
    for lane in embedder.local.batcher.lanes:
        lane.close()
    embedder.local.batcher = QueryBatcher([PriorityWorker("test-start-lane")], lambda _lane: model,
                                    lambda m, texts: m.embed(texts))
    return embedder


async def test_start_query_submits_before_it_returns(monkeypatch: pytest.MonkeyPatch) -> None:
    model = GatedModel()
    embedder = embedder_with(model)
    settings = Settings.from_env({}, EMBEDDING_PROVIDER="local")
    submitted: list[str] = []
    submit = embedder.local.batcher.submit

    def recorded(text: str) -> object:
        submitted.append(text)
        return submit(text)

    monkeypatch.setattr(embedder.local.batcher, "submit", recorded)
    try:
        waiting = embedder.start_query(settings, "where is my cat")
        assert submitted == ["where is my cat"]  # nothing awaited yet
        vector, provenance = await waiting
        again, _ = await embedder.start_query(settings, "where is my cat")  # cached
    finally:
        await embedder.close()
    assert provenance.provider == "local"
    assert np.allclose(vector, fake_vector("where is my cat", 16), atol=1e-6)
    assert again is vector and submitted == ["where is my cat"]
    assert model.calls == [["where is my cat"]]


async def test_a_query_submitted_early_is_still_dropped_at_its_deadline() -> None:
    model = GatedModel()
    embedder = embedder_with(model)
    settings = Settings.from_env({}, EMBEDDING_PROVIDER="local", QUERY_EMBEDDING_TIMEOUT=0.05)
    try:
        hold = embedder.local.batcher.submit("hold")
        await asyncio.sleep(0.01)
        with pytest.raises(QueryEmbeddingTimeout):
            await embedder.start_query(settings, "too late")
        model.gate.set()
        await hold.future
        after, _ = await embedder.embed_query(settings, "next one")
    finally:
        model.gate.set()
        await embedder.close()
    assert model.calls == [["hold"], ["next one"]]  # the late query was never computed
    assert np.allclose(after, fake_vector("next one", 16), atol=1e-6)
