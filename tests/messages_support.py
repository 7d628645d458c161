"""Shared set-up for Messages tests: the fake Anthropic provider and a gateway pointed at it."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from anthropic import AsyncAnthropic

from pawwake.db.pool import cursor, fetch_all
from pawwake.services import services_of
from tests.fake_anthropic import FakeAnthropic
from tests.fake_upstream import on_loopback
from tests.gateway_support import GATEWAY_KEY, GatewayStarter

MEMORY_ON = {"MEMORY_ENABLED": True, "MEMORY_VECTOR_ENABLED": False, "JOB_WORKERS": 0,
             "MEMORY_EXTRACT_INTERVAL": 0}


@pytest.fixture
async def anthropic_upstream(aiohttp_server: Any) -> FakeAnthropic:
    return await on_loopback(FakeAnthropic(), aiohttp_server)


async def start_gateway(gateway: GatewayStarter, fake: FakeAnthropic, **overrides: Any
                        ) -> TestClient:
    values: dict[str, Any] = {"MESSAGES_BASE_URL": fake.base_url,
                              "GATEWAY_SECRET": GATEWAY_KEY}
    values.update(overrides)
    return await gateway(**values)


async def usage_with_cache(client: TestClient) -> list[dict[str, Any]]:
    async with cursor(services_of(client.server.app).database.pool) as cur:
        return await fetch_all(cur,
                               "SELECT session_id, model, prompt_tokens, completion_tokens,"
                               " total_tokens, cached_tokens, cache_creation_tokens"
                               " FROM token_usage ORDER BY id")


def sdk(client: Any, **kwargs: Any) -> AsyncAnthropic:
    """The real ``anthropic`` SDK pointed at the gateway under test, no retries."""
    options: dict[str, Any] = {"api_key": GATEWAY_KEY, "max_retries": 0}
    options.update(kwargs)
    return AsyncAnthropic(base_url=str(client.make_url("")), **options)
