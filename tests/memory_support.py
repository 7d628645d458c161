"""Helpers for the memory API tests: create rows through the API, read and shape rows by SQL."""

from __future__ import annotations

from typing import Any

from aiohttp.test_utils import TestClient

from pawwake.db.pool import cursor, execute, fetch_all, fetch_one
from pawwake.services import services_of


def pool(client: TestClient) -> Any:
    return services_of(client.server.app).database.pool


async def create(client: TestClient, content: str, **fields: Any) -> dict[str, Any]:
    response = await client.post("/api/memories", json={"content": content, **fields})
    assert response.status == 201, await response.text()
    return await response.json()


async def rows(client: TestClient, where: str = "true", params: Any = None
               ) -> list[dict[str, Any]]:
    async with cursor(pool(client)) as cur:
        return await fetch_all(cur, f"SELECT * FROM memories WHERE {where} ORDER BY id",
                               params)


async def row(client: TestClient, memory_id: int) -> dict[str, Any] | None:
    async with cursor(pool(client)) as cur:
        return await fetch_one(cur, "SELECT * FROM memories WHERE id = %s", (memory_id,))


async def sql(client: TestClient, statement: str, params: Any = None) -> int:
    async with cursor(pool(client)) as cur:
        return await execute(cur, statement, params)


async def supersede(client: TestClient, older: int, newer: int) -> None:
    """What extraction does: the older row steps back and points at its replacement."""
    await sql(client, "UPDATE memories SET is_active = false, archived_at = now(),"
                      " superseded_by = %s WHERE id = %s", (newer, older))


async def merge(client: TestClient, merged: int, sources: list[int]) -> None:
    """What a confirmed merge does: the merged row lists its sources, which are archived."""
    await sql(client, "UPDATE memories SET merged_from = %s::bigint[], layer = 2 WHERE id = %s",
              (sources, merged))
    await sql(client, "UPDATE memories SET is_active = false, archived_at = now()"
                      " WHERE id = ANY(%s)", (sources,))


async def error_of(response: Any) -> dict[str, Any]:
    body = await response.json()
    assert set(body) == {"error"}, body
    return body["error"]
