"""The database layer: migrations, the embedded server, runtime flags."""

from __future__ import annotations

import asyncio

import aiopg

from pawwake.db.migrate import migrate, migration_files
from pawwake.db.pool import create_pool, cursor, fetch_all, transaction


async def _migrate(pool: aiopg.Pool) -> dict[str, bool]:
    async with transaction(pool) as cur:
        return await migrate(cur)


async def test_migrations_are_recorded_once_even_when_two_processes_race(database_url: str) -> None:
    pools = [await create_pool(database_url, maxsize=2) for _ in range(2)]
    try:
        results = await asyncio.gather(*(_migrate(pool) for pool in pools))
        async with cursor(pools[0]) as cur:
            rows = await fetch_all(cur, "SELECT name FROM schema_migrations ORDER BY name")
    finally:
        for pool in pools:
            pool.close()
            await pool.wait_closed()
    assert [row["name"] for row in rows] == [p.name for p in migration_files()]
    assert results[0] == results[1] == {"pgvector": True, "legacy": False}


async def test_health_reports_database_state_and_kind(client) -> None:
    response = await client.get("/")
    assert response.status == 200
    body = await response.json()
    assert body["status"] == "running"
    assert body["database"] == "ready"
    assert body["database_kind"] == "external"
    assert body["vectors"] == "pgvector"
