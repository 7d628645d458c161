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


async def test_new_search_terms_go_straight_into_the_keyword_indexes(database_url: str) -> None:
    """A GIN pending list is read in full by every keyword probe until a vacuum merges it (a
    few hundred writes doubled a search's keyword statement): written terms are indexed at
    once, so the list stays empty however many memories and messages were just written."""
    pool = await create_pool(database_url, maxsize=2)
    try:
        await _migrate(pool)
        async with cursor(pool) as cur:
            await cur.execute("CREATE EXTENSION IF NOT EXISTS pgstattuple")
            await cur.execute(
                "INSERT INTO memories (content, search_terms) SELECT 'memory ' || n,"
                " ARRAY['term' || n, 'shared'] FROM generate_series(1, 300) AS n")
            await cur.execute(
                "INSERT INTO conversations (session_id, role, content, search_terms)"
                " SELECT 's', 'user', 'line ' || n, ARRAY['word' || n, 'shared']"
                " FROM generate_series(1, 300) AS n")
            rows = await fetch_all(
                cur, "SELECT name, (pgstatginindex(name::regclass)).pending_tuples AS pending"
                     " FROM unnest(ARRAY['memories_terms', 'conversations_terms']) AS name")
    finally:
        pool.close()
        await pool.wait_closed()
    assert {row["name"]: row["pending"] for row in rows} == {
        "memories_terms": 0, "conversations_terms": 0}
