"""Two real gateway processes on one database: what one replica writes, deletes or saves, the
other serves within seconds, and what must happen once happens once across both."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.conditions import until_answered
from tests.gateway_process import GatewayProcess, start_all

KEY = "fleet-gateway-key-0123456789abcdef"
HEADERS = {"X-Gateway-Key": KEY}
PASSWORD = "fleet-dashboard-password"
SESSION_SECRET = "fleet-session-secret-0123456789abcdef-0123456789"
SETTINGS_SEEN_SECONDS = 6.0  # a save is in force on every replica within this long


def replica_settings(database_url: str, upstream_url: str, **extra: str) -> dict[str, str]:
    return {"DATABASE_URL": database_url, "API_BASE_URL": upstream_url,
            "API_KEY": "sk-upstream-0123456789", "DEFAULT_MODEL": "test/model-a",
            "GATEWAY_SECRET": KEY, "DASHBOARD_PASSWORD": PASSWORD,
            "SESSION_SECRET": SESSION_SECRET, "MEMORY_ENABLED": "true",
            "MEMORY_EXTRACT_INTERVAL": "0", "EMBEDDING_PROVIDER": "local",
            "VECTOR_BACKEND": "numpy", "JOB_WORKERS": "1", **extra}


class Fleet:
    def __init__(self, replicas: list[GatewayProcess], session: aiohttp.ClientSession) -> None:
        self.replicas = replicas
        self.http = session

    async def call(self, replica: int, method: str, path: str, **kwargs: Any) -> Any:
        url = self.replicas[replica].base_url + path
        async with self.http.request(method, url, headers=HEADERS, **kwargs) as response:
            body = await response.json()
            assert response.status < 300, (response.status, body)
            return body


@pytest.fixture
async def fleet(database_url: str, upstream: Any, tmp_path: Path) -> AsyncIterator[Fleet]:
    replicas = [GatewayProcess(tmp_path / f"data-{n}", replica_settings(
        database_url, upstream.base_url), name=f"replica-{n}") for n in range(2)]
    try:
        await start_all(*replicas)
        async with aiohttp.ClientSession() as session:
            yield Fleet(replicas, session)
    finally:
        for replica in replicas:
            replica.stop()


async def search(fleet: Fleet, replica: int, query: str) -> list[dict[str, Any]]:
    """Results of a memory search through ``replica`` (keyword mode until a vector exists)."""
    body = await fleet.call(replica, "POST", "/api/memories/search",
                            json={"q": query, "limit": 5})
    return list(body["results"])


async def test_a_memory_written_through_one_replica_is_found_through_the_other(
        fleet: Fleet) -> None:
    await search(fleet, 1, "暖场")  # replica 1 loads its (empty) numpy index now
    created = await fleet.call(0, "POST", "/api/memories",
                               json={"content": "用户的猫叫小橘，最爱吃三文鱼", "importance": 6})
    memory_id = created["id"]

    async def found_with_its_vector() -> bool:
        results = await search(fleet, 1, "小橘喜欢吃什么")
        return any(r["id"] == memory_id and r["similarity"] is not None for r in results)

    assert await until_answered(found_with_its_vector, interval=0.2) < 10
    await fleet.call(0, "DELETE", f"/api/memories/{memory_id}")
    assert all(r["id"] != memory_id for r in await search(fleet, 1, "小橘喜欢吃什么"))


def setting_value(body: dict[str, Any], name: str) -> Any:
    return next(s["value"] for s in body["settings"] if s["name"] == name)


async def test_a_setting_saved_through_one_replica_is_in_force_on_an_idle_one(
        fleet: Fleet) -> None:
    """The other replica may have served nothing since: its very next request already sees
    the save (it used to answer once more with what it had read before)."""
    before = await fleet.call(1, "GET", "/api/settings")
    assert setting_value(before, "MAX_MEMORIES_INJECT") != 7
    await fleet.call(0, "PUT", "/api/settings", json={"MAX_MEMORIES_INJECT": 7})
    await asyncio.sleep(SETTINGS_SEEN_SECONDS)  # the replica is idle meanwhile
    after = await fleet.call(1, "GET", "/api/settings")
    assert setting_value(after, "MAX_MEMORIES_INJECT") == 7
