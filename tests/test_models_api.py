"""GET /api/models and /v1/models: the provider's model list, per provider shape, cached,
failing clearly; /v1/models backs off from a failing provider and answers at once meanwhile."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest

from pawwake.llm.models import ModelCatalog, memory_model, models_url, parse_models, provider_of
from pawwake.services import services_of
from pawwake.settings import Settings

UPSTREAM_KEY = "sk-upstream-test-key-0123456789"


@pytest.mark.parametrize(("base", "provider", "url"), [
    ("https://openrouter.ai/api/v1", "openrouter", "https://openrouter.ai/api/v1/models"),
    ("https://api.openai.com/v1", "openai", "https://api.openai.com/v1/models"),
    ("https://generativelanguage.googleapis.com/v1beta/openai", "google",
     "https://generativelanguage.googleapis.com/v1beta/openai/models"),
    ("https://generativelanguage.googleapis.com/v1beta", "google",
     "https://generativelanguage.googleapis.com/v1beta/openai/models"),
    ("http://localhost:11434/v1", "openai-compatible", "http://localhost:11434/v1/models"),
])
def test_provider_and_models_url_follow_the_base_url(base: str, provider: str, url: str) -> None:
    assert provider_of(base) == provider
    assert models_url(base) == url


@pytest.mark.parametrize(("base", "chosen", "expected"), [
    ("https://openrouter.ai/api/v1/chat/completions", "", "anthropic/claude-haiku-4.5"),
    ("https://api.openai.com/v1", "", "gpt-4.1-mini"),
    ("https://generativelanguage.googleapis.com/v1beta/openai", "", "gemini-2.5-flash-lite"),
    ("http://localhost:11434/v1", "", "qwen3:8b"),  # no known cheap model: DEFAULT_MODEL
    ("https://openrouter.ai/api/v1", "openai/gpt-5-nano", "openai/gpt-5-nano"),
])
def test_memory_model_empty_is_a_cheap_model_of_the_provider(base: str, chosen: str,
                                                              expected: str) -> None:
    settings = Settings.from_env({}, API_BASE_URL=base, MEMORY_MODEL=chosen,
                                 DEFAULT_MODEL="qwen3:8b" if "11434" in base
                                 else "anthropic/claude-sonnet-4.5")
    assert memory_model(settings) == expected


def test_parse_skips_junk_and_keeps_names() -> None:
    models = parse_models({"data": [
        {"id": "b"}, {"id": "models/a", "display_name": "A"}, {"name": "no id"}, "junk",
        {"id": "c", "context_length": True}, {"id": "b"}]})
    assert models == [{"id": "a", "name": "A"}, {"id": "b", "name": "b"},
                      {"id": "c", "name": "c"}]


async def test_lists_models_of_an_openai_compatible_provider(make_client: Any,
                                                             upstream: Any) -> None:
    upstream.models = ["zeta/model", "alpha/model"]
    client = await make_client()
    response = await client.get("/api/models")
    assert response.status == 200
    assert await response.json() == {
        "data": [{"id": "alpha/model", "name": "alpha/model"},
                 {"id": "zeta/model", "name": "zeta/model"}],
        "source": "openai-compatible"}


async def test_openrouter_shape_gives_names_and_context_with_the_key(make_client: Any,
                                                                     upstream: Any) -> None:
    client = await make_client(API_BASE_URL=str(upstream.server.make_url("/openrouter/api/v1")))
    response = await client.get("/api/models")
    assert response.status == 200
    assert (await response.json())["data"] == [
        {"id": "anthropic/claude-sonnet-4.5", "name": "Anthropic: Claude Sonnet 4.5",
         "context_length": 1000000},
        {"id": "openai/gpt-5", "name": "OpenAI: GPT-5", "context_length": 400000}]
    sent = upstream.requests[-1]
    assert sent.path == "/openrouter/api/v1/models"
    assert sent.headers["Authorization"] == f"Bearer {UPSTREAM_KEY}"


async def test_google_shape_loses_the_models_prefix(make_client: Any, upstream: Any) -> None:
    base = str(upstream.server.make_url("/google/v1beta/openai/chat/completions"))
    client = await make_client(API_BASE_URL=base)
    response = await client.get("/api/models")
    assert response.status == 200
    assert (await response.json())["data"] == [
        {"id": "gemini-2.5-flash", "name": "Gemini 2.5 Flash"},
        {"id": "gemini-2.5-pro", "name": "gemini-2.5-pro"}]


async def test_list_is_cached_until_the_provider_settings_change(make_client: Any,
                                                                 upstream: Any) -> None:
    client = await make_client(ADMIN_SECRET="admin-secret-for-routing-000001")
    first = await (await client.get("/api/models")).json()
    upstream.models = ["new/model"]
    again = await (await client.get("/api/models")).json()
    assert again == first
    assert upstream.model_requests == 1
    changed = await client.put("/api/settings", json={"API_KEY": "sk-another-key-000000"},
                               headers={"X-Admin-Key": "admin-secret-for-routing-000001"})
    assert changed.status == 200
    fresh = await (await client.get("/api/models")).json()
    assert [m["id"] for m in fresh["data"]] == ["new/model"]
    assert upstream.model_requests == 2


async def test_provider_error_is_a_502_without_the_key(make_client: Any, upstream: Any) -> None:
    upstream.models_status = 401
    client = await make_client()
    response = await client.get("/api/models")
    assert response.status == 502
    body = await response.json()
    assert body["error"]["code"] == "models_unavailable"
    assert "HTTP 401" in body["error"]["message"]
    assert UPSTREAM_KEY not in await response.text()
    upstream.models_status = 200  # the explicit request always asks the provider again
    assert (await client.get("/api/models")).status == 200


async def test_unreachable_provider_is_a_502(make_client: Any) -> None:
    with socket.socket() as sock:  # a port that nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = await make_client(API_BASE_URL=f"http://127.0.0.1:{port}/v1")
    response = await client.get("/api/models")
    assert response.status == 502
    assert "could not reach 127.0.0.1" in (await response.json())["error"]["message"]


async def test_models_api_requires_the_gateway_key_when_set(make_client: Any) -> None:
    client = await make_client(GATEWAY_SECRET="gateway-secret-for-programs-0001")
    assert (await client.get("/api/models")).status == 401
    response = await client.get("/api/models",
                                headers={"X-Gateway-Key": "gateway-secret-for-programs-0001"})
    assert response.status == 200


class Clock:
    """The catalog's clock, moved by hand so back-off and cache expiry need no sleeping."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def models_client(make_client: Any) -> tuple[Any, ModelCatalog, Clock]:
    client = await make_client()
    catalog = services_of(client.server.app).models
    clock = Clock()
    catalog.clock = clock
    return client, catalog, clock


async def v1_model_ids(client: Any) -> list[str]:
    response = await asyncio.wait_for(client.get("/v1/models"), 30)  # a guard, not a measure
    assert response.status == 200
    return [model["id"] for model in (await response.json())["data"]]


async def test_v1_models_backs_off_from_a_failing_provider_then_recovers(
        make_client: Any, upstream: Any) -> None:
    upstream.models_status = 503
    client, catalog, clock = await models_client(make_client)
    assert await v1_model_ids(client) == ["test/model-a"]
    assert upstream.model_requests == 1
    upstream.models_status = 200  # recovered, but the back-off is not over yet
    assert await v1_model_ids(client) == ["test/model-a"]
    assert upstream.model_requests == 1
    clock.now += catalog.failure_backoff + 1
    assert await v1_model_ids(client) == ["test/model-a", "test/model-b"]
    assert upstream.model_requests == 2


async def test_v1_models_answers_from_the_last_good_list_while_the_provider_fails(
        make_client: Any, upstream: Any) -> None:
    upstream.models = ["old/one", "old/two"]
    client, catalog, clock = await models_client(make_client)
    assert await v1_model_ids(client) == ["test/model-a", "old/one", "old/two"]
    clock.now += catalog.cache_seconds + 1  # the list is old: the provider is asked again
    upstream.models_status = 500
    assert await v1_model_ids(client) == ["test/model-a", "old/one", "old/two"]
    assert await v1_model_ids(client) == ["test/model-a", "old/one", "old/two"]
    assert upstream.model_requests == 2
    upstream.models_status = 200
    upstream.models = ["new/one"]
    clock.now += catalog.failure_backoff + 1
    assert await v1_model_ids(client) == ["test/model-a", "new/one"]
    assert upstream.model_requests == 3


async def test_v1_models_does_not_wait_twice_on_a_hanging_provider(make_client: Any,
                                                                   upstream: Any) -> None:
    upstream.models_gate = asyncio.Event()  # /models accepts the request and never answers
    client, catalog, clock = await models_client(make_client)
    catalog.quick_wait = 0.2
    try:
        assert await v1_model_ids(client) == ["test/model-a"]
        assert upstream.model_requests == 1
        # Were the provider asked again, this call would hang until the guard fails the test.
        catalog.quick_wait = 3600
        assert await v1_model_ids(client) == ["test/model-a"]
        assert upstream.model_requests == 1
    finally:
        upstream.models_gate.set()
    upstream.models_gate = None
    clock.now += catalog.failure_backoff + 1
    assert await v1_model_ids(client) == ["test/model-a", "test/model-b"]
    assert upstream.model_requests == 2


async def test_dashboard_list_ends_the_back_off_of_v1_models(make_client: Any,
                                                             upstream: Any) -> None:
    upstream.models_status = 502
    client, _catalog, _clock = await models_client(make_client)
    assert await v1_model_ids(client) == ["test/model-a"]
    upstream.models_status = 200
    assert (await client.get("/api/models")).status == 200  # asked although backing off
    assert await v1_model_ids(client) == ["test/model-a", "test/model-b"]
    assert upstream.model_requests == 2
