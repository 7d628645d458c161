"""The embedder: an OpenAI-compatible API (a real fake server on loopback) and local e5."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
import pytest

from pawwake.db.pool import cursor, fetch_all
from pawwake.llm.embeddings import (
    DEFAULT_THRESHOLDS,
    LOCAL_DIM,
    LOCAL_MODEL,
    Embedder,
    EmbeddingError,
    Provenance,
    provider_for,
    semantic_threshold,
)
from pawwake.llm.embeddings.local_engine import cpu_quota, local_model_threads
from pawwake.llm.sse import TokenUsage
from pawwake.services import services_of
from pawwake.settings import Settings
from tests.embedding_server import FakeEmbeddings, serve_embeddings

SECRET = "sk-embed-secret-0123456789"


@pytest.fixture
async def fake(aiohttp_server: Any) -> FakeEmbeddings:
    return await serve_embeddings(aiohttp_server)


async def api_app(make_client: Any, fake: FakeEmbeddings, **overrides: Any) -> Any:
    client = await make_client(JOB_WORKERS=0, EMBEDDING_PROVIDER="auto",
                               EMBEDDING_API_KEY=SECRET, EMBEDDING_BASE_URL=fake.base_url,
                               EMBEDDING_MODEL="fake-embed-1", EMBEDDING_DIM=32, **overrides)
    app = client.server.app
    return app, services_of(app).embedder, services_of(app).config.current()


def test_auto_picks_the_api_only_with_a_key() -> None:
    assert provider_for(Settings.from_env({})) == "local"
    assert provider_for(Settings.from_env({}, EMBEDDING_API_KEY="k")) == "api"
    assert provider_for(Settings.from_env({}, EMBEDDING_API_KEY="k",
                                          EMBEDDING_PROVIDER="local")) == "local"
    assert provider_for(Settings.from_env({}, EMBEDDING_PROVIDER="api")) == "api"


def test_threshold_follows_the_provider_unless_set() -> None:
    assert semantic_threshold(Settings.from_env({})) == DEFAULT_THRESHOLDS["local"]
    assert semantic_threshold(Settings.from_env({}, EMBEDDING_API_KEY="k")) == 0.3
    assert semantic_threshold(Settings.from_env({}, MEMORY_SEMANTIC_THRESHOLD=0.5)) == 0.5
    assert DEFAULT_THRESHOLDS["local"] > DEFAULT_THRESHOLDS["api"]


async def test_api_request_shape_order_and_normalisation(make_client: Any,
                                                         fake: FakeEmbeddings) -> None:
    _app, embedder, settings = await api_app(make_client, fake)
    texts = ["first text", "第二段文字", "third"]
    matrix, provenance = await embedder.embed_passages(settings, texts)
    assert provenance == Provenance("api", "fake-embed-1", 32)
    assert matrix.shape == (3, 32) and matrix.dtype == np.float32
    assert np.allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-5)
    from tests.embedding_server import fake_vector
    for row, text in zip(matrix, texts, strict=True):  # input order despite a shuffled answer
        assert np.allclose(row, fake_vector(text, 32), atol=1e-5)
    request = fake.requests[0]
    assert request["model"] == "fake-embed-1" and request["input"] == texts
    assert request["dimensions"] == 32
    assert fake.headers[0]["Authorization"] == f"Bearer {SECRET}"


async def test_api_batches_large_inputs(make_client: Any, fake: FakeEmbeddings) -> None:
    _app, embedder, settings = await api_app(make_client, fake)
    texts = [f"memory number {i}" for i in range(150)]
    matrix, _ = await embedder.embed_passages(settings, texts)
    assert matrix.shape == (150, 32)
    assert [len(r["input"]) for r in fake.requests] == [64, 64, 22]
    assert fake.inputs == texts


@pytest.mark.parametrize("status", [400, 422])
async def test_dimensions_rejected_then_retried_without_and_remembered(
        make_client: Any, fake: FakeEmbeddings, status: int) -> None:
    fake.reject_dimensions = status
    _app, embedder, settings = await api_app(make_client, fake)
    matrix, provenance = await embedder.embed_passages(settings, ["hello world"])
    assert [("dimensions" in r) for r in fake.requests] == [True, False]
    assert matrix.shape == (1, fake.natural_dim)
    assert provenance == Provenance("api", "fake-embed-1", fake.natural_dim)
    await embedder.embed_passages(settings, ["again"])
    assert [("dimensions" in r) for r in fake.requests] == [True, False, False]


async def test_a_server_that_ignores_dimensions_teaches_the_real_size(
        make_client: Any, fake: FakeEmbeddings) -> None:
    fake.ignore_dimensions = True
    _app, embedder, settings = await api_app(make_client, fake)
    assert embedder.configured_provenance(settings).dim == 32  # not known yet
    assert (await embedder.provenance(settings)).dim == fake.natural_dim  # one probe
    assert len(fake.requests) == 1
    assert (await embedder.provenance(settings)).dim == fake.natural_dim
    assert len(fake.requests) == 1


async def test_a_failed_size_probe_is_not_repeated_at_once(make_client: Any,
                                                           fake: FakeEmbeddings) -> None:
    _app, embedder, settings = await api_app(make_client, fake)
    fake.fail_next(503)
    for _ in range(3):  # e.g. a status page polling every second
        with pytest.raises(EmbeddingError):
            await embedder.provenance(settings)
    assert len(fake.requests) == 1
    assert embedder.configured_provenance(settings).dim == 32


async def test_other_failures_raise_without_leaking_the_key(make_client: Any,
                                                            fake: FakeEmbeddings) -> None:
    _app, embedder, settings = await api_app(make_client, fake)
    fake.fail_next(500, {"error": {"message": f"upstream trouble for key {SECRET}"}})
    with pytest.raises(EmbeddingError) as failure:
        await embedder.embed_passages(settings, ["x"])
    assert failure.value.status == 500 and not failure.value.rate_limited
    assert SECRET not in str(failure.value) and "500" in str(failure.value)
    fake.fail_next(429)
    with pytest.raises(EmbeddingError) as limited:
        await embedder.embed_passages(settings, ["x"])
    assert limited.value.rate_limited and limited.value.retry_after == 7.0
    fake.fail_next(400)  # a 400 with dimensions is retried once; a second 400 is an error
    fake.fail_next(400)
    with pytest.raises(EmbeddingError) as rejected:
        await embedder.embed_passages(settings, ["x"])
    assert rejected.value.status == 400


async def test_malformed_answers_are_errors(make_client: Any, fake: FakeEmbeddings) -> None:
    _app, embedder, settings = await api_app(make_client, fake)
    fake.fail_next(200, {"data": [{"index": 0, "embedding": "nope"}]})
    with pytest.raises(EmbeddingError, match="malformed"):
        await embedder.embed_passages(settings, ["x"])
    fake.fail_next(200, {"data": []})
    with pytest.raises(EmbeddingError, match="one vector per input"):
        await embedder.embed_passages(settings, ["x"])


async def test_unreachable_api_is_an_error(make_client: Any, fake: FakeEmbeddings) -> None:
    _app, embedder, settings = await api_app(make_client, fake)
    settings = settings.with_values({"EMBEDDING_BASE_URL": "http://127.0.0.1:9/v1"})
    with pytest.raises(EmbeddingError, match="unreachable"):
        await embedder.embed_query(settings, "x")


async def test_usage_is_recorded_as_embed(make_client: Any, fake: FakeEmbeddings) -> None:
    app, embedder, settings = await api_app(make_client, fake)
    await embedder.embed_passages(settings, ["abc", "defg"])
    async with cursor(services_of(app).database.pool) as cur:
        rows = await fetch_all(cur,
                               "SELECT model, prompt_tokens, usage_type FROM token_usage")
    assert rows == [{"model": "fake-embed-1", "prompt_tokens": 7, "usage_type": "embed"}]


async def test_the_embedder_hands_each_calls_tokens_to_its_owner(fake: FakeEmbeddings) -> None:
    """The embedder embeds; what becomes of the tokens is its owner's (the app books them as
    ``embed`` rows, above): one report per API call, a cached query none."""
    reported: list[tuple[str, int, int]] = []

    async def record(model: str, usage: TokenUsage) -> None:
        reported.append((model, usage.prompt, usage.total))

    settings = Settings.from_env({}, EMBEDDING_PROVIDER="api", EMBEDDING_API_KEY=SECRET,
                                 EMBEDDING_BASE_URL=fake.base_url,
                                 EMBEDDING_MODEL="fake-embed-1", EMBEDDING_DIM=32)
    async with aiohttp.ClientSession() as http:
        embedder = Embedder(http, usage=record)
        try:
            await embedder.embed_passages(settings, ["abc", "defg"])
            await embedder.embed_query(settings, "where")
            await embedder.embed_query(settings, "where")
        finally:
            await embedder.close()
    assert reported == [("fake-embed-1", 7, 7), ("fake-embed-1", 5, 5)]


async def test_query_embeddings_are_cached_per_provenance(make_client: Any,
                                                          fake: FakeEmbeddings) -> None:
    _app, embedder, settings = await api_app(make_client, fake)
    first, _ = await embedder.embed_query(settings, "where is my cat")
    second, _ = await embedder.embed_query(settings, "where is my cat")
    assert np.array_equal(first, second) and len(fake.requests) == 1
    other_model = settings.with_values({"EMBEDDING_MODEL": "fake-embed-2"})
    await embedder.embed_query(other_model, "where is my cat")
    assert len(fake.requests) == 2


async def test_local_model_uses_query_and_passage_roles() -> None:
    embedder = Embedder(http=None)
    settings = Settings.from_env({}, EMBEDDING_PROVIDER="local",
                                 # a new engine loads inside the first query's wait:
                                 # this test is about roles, not the deadline
                                 QUERY_EMBEDDING_TIMEOUT=60)
    try:
        query, provenance = await embedder.embed_query(settings, "我的猫叫小橘")
        passages, passage_provenance = await embedder.embed_passages(
            settings, ["我的猫叫小橘", "The user is allergic to peanuts"])
    finally:
        await embedder.close()
    assert provenance == passage_provenance == Provenance("local", LOCAL_MODEL, LOCAL_DIM)
    assert query.shape == (LOCAL_DIM,) and passages.shape == (2, LOCAL_DIM)
    assert np.allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-5)
    # Same text, different role prefix: close but not the same vector.
    assert 0.8 < float(query @ passages[0]) < 0.999
    assert float(query @ passages[0]) > float(query @ passages[1])


async def test_the_app_has_one_embedder_that_closes(make_client: Any) -> None:
    client = await make_client(JOB_WORKERS=0)
    embedder = services_of(client.server.app).embedder
    assert isinstance(embedder, Embedder)
    await client.close()
    with pytest.raises(RuntimeError):
        embedder.local.worker.submit(0, int).result()


def test_the_local_model_uses_one_thread_when_less_than_two_cpus_are_granted(
        tmp_path: Path) -> None:
    assert cpu_quota("10000 100000") == 0.1
    assert cpu_quota("max 100000") is None
    assert cpu_quota("garbage") is None and cpu_quota("") is None
    cpu_max = tmp_path / "cpu.max"
    cpu_max.write_text("10000 100000\n")  # a free instance's tenth of a CPU
    assert local_model_threads(str(cpu_max)) == 1
    cpu_max.write_text("max 100000\n")
    assert local_model_threads(str(cpu_max)) == (2 if len(os.sched_getaffinity(0)) >= 2 else 1)
    assert local_model_threads(str(tmp_path / "absent")) == local_model_threads(str(cpu_max))
