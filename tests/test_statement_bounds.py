"""Every database statement is bounded by the kind of work that waits for it, the bound never
leaks to other users of a pooled server connection, and a request whose client hangs up stops
its statement (in the test server and in the real process alike)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import psycopg2
import pytest

from pawwake import request_statements
from pawwake.db.pool import connection, create_pool, cursor, fetch_one, transaction
from pawwake.db.statement_bounds import NO_BOUND, StatementTimeout, statements_bounded
from pawwake.services import services_of
from tests.conditions import until
from tests.pgbouncer_support import PGBOUNCER, pgbouncer
from tests.test_shutdown import ROOT, free_port, gateway_env, tail_of, wait_until_up

APP_NAME = "pawwake-bounded"
SEED = [{"session_id": "s1", "messages": [
    {"role": "user", "content": "原来的话", "created_at": "2026-01-01T10:00:00Z"}]}]


def named(database_url: str) -> str:
    """The test database's URL with the gateway's connections named, to find them."""
    return f"{database_url}&application_name={APP_NAME}"


@pytest.fixture
def locker(database_url: str) -> Iterator[Any]:
    """A connection of the test's own, outside the gateway, for locks and looking around."""
    conn = psycopg2.connect(database_url)
    yield conn
    conn.rollback()
    conn.close()


def gateway_waits(locker: Any) -> bool:
    """Whether a statement of the gateway is waiting for a lock."""
    with locker.cursor() as cur:
        cur.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
                    " AND wait_event_type = 'Lock'", (APP_NAME,))
        return bool(cur.fetchone()[0])


async def seeded_message(client: Any) -> int:
    response = await client.post("/api/conversations/import", json=SEED)
    assert response.status == 201, await response.text()
    response = await client.get("/api/conversations/s1/messages")
    return int((await response.json())["messages"][0]["id"])


def lock_row(locker: Any, message_id: int) -> None:
    with locker.cursor() as cur:
        cur.execute("SELECT 1 FROM conversations WHERE id = %s FOR UPDATE", (message_id,))


def stored_content(locker: Any, message_id: int) -> str:
    locker.rollback()  # the lock goes; a fresh snapshot
    with locker.cursor() as cur:
        cur.execute("SELECT content FROM conversations WHERE id = %s", (message_id,))
        return str(cur.fetchone()[0])


async def current(pool: Any, name: str) -> str:
    async with cursor(pool) as cur:
        row = await fetch_one(cur, "SELECT current_setting(%s) AS value", (name,))
    assert row is not None
    return str(row["value"])


async def test_each_kind_of_work_has_its_bound(make_client: Any) -> None:
    client = await make_client(JOB_WORKERS=0)
    pool = services_of(client.server.app).database.pool
    # Outside a request (jobs, warm-ups): minutes. Migrations: none.
    assert await current(pool, "statement_timeout") == "5min"
    assert await current(pool, "client_connection_check_interval") == "1s"
    with statements_bounded(NO_BOUND):
        assert await current(pool, "statement_timeout") == "0"
    async with transaction(pool) as cur:
        assert await fetch_one(cur, "SHOW statement_timeout") == {"statement_timeout": "5min"}
    # SET LOCAL: the connection itself keeps the server's default afterwards.
    async with connection(pool) as conn, conn.cursor() as cur:
        await cur.execute("SHOW statement_timeout")
        assert await cur.fetchone() == ("0",)


async def test_a_request_statement_stops_at_its_bound(make_client: Any, database_url: str,
                                                      locker: Any,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A statement stuck on a lock is stopped at the request's bound (shortened here; it is
    15 s) and answered as slow, not as a database that went away."""
    monkeypatch.setattr(request_statements, "REQUEST_STATEMENT_SECONDS", 0.5)
    client = await make_client(JOB_WORKERS=0, DATABASE_URL=named(database_url))
    message_id = await seeded_message(client)
    lock_row(locker, message_id)
    async with asyncio.timeout(30):
        response = await client.put(f"/api/conversations/messages/{message_id}",
                                    json={"content": "改过的话"})
    body = await response.json()
    assert response.status == 503, body
    assert body["error"]["code"] == "database_timeout"
    assert (await (await client.get("/")).json())["database"] == "ready"
    assert stored_content(locker, message_id) == "原来的话"


async def test_a_statement_stops_when_its_client_leaves(make_client: Any, database_url: str,
                                                        locker: Any) -> None:
    """The test server cancels a handler whose client hung up (so does the real process,
    below); its statement, waiting on a lock, stops too: the edit is not applied later."""
    client = await make_client(JOB_WORKERS=0, DATABASE_URL=named(database_url))
    message_id = await seeded_message(client)
    lock_row(locker, message_id)
    with pytest.raises(TimeoutError):
        await client.put(f"/api/conversations/messages/{message_id}",
                         json={"content": "改过的话"}, timeout=aiohttp.ClientTimeout(total=1))
    await until(lambda: not gateway_waits(locker))
    assert stored_content(locker, message_id) == "原来的话"


async def test_the_real_process_stops_a_statement_whose_client_left(
        tmp_path: Path, database_url: str, upstream: Any, locker: Any) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {**gateway_env(upstream.base_url, tmp_path / "data"),
           "DATABASE_URL": named(database_url), "MEMORY_ENABLED": "false", "JOB_WORKERS": "0"}
    headers = {"X-Gateway-Key": env["GATEWAY_SECRET"]}
    log_path = tmp_path / "gateway.log"
    with log_path.open("wb") as log_file:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "pawwake.py", "--host", "127.0.0.1", "--port", str(port), cwd=ROOT,
            env=env, stdout=log_file, stderr=asyncio.subprocess.STDOUT)
    try:
        async with aiohttp.ClientSession(headers=headers) as session:
            await wait_until_up(session, base, process, log_path)
            async with session.post(base + "/api/conversations/import", json=SEED) as resp:
                assert resp.status == 201, await resp.text()
            async with session.get(base + "/api/conversations/s1/messages") as resp:
                message_id = int((await resp.json())["messages"][0]["id"])
            lock_row(locker, message_id)
            with pytest.raises(TimeoutError):
                await session.put(f"{base}/api/conversations/messages/{message_id}",
                                  json={"content": "改过的话"},
                                  timeout=aiohttp.ClientTimeout(total=1))
            await until(lambda: not gateway_waits(locker))
            assert stored_content(locker, message_id) == "原来的话", tail_of(log_path)
    finally:
        process.terminate()
        await process.wait()


@pytest.mark.skipif(PGBOUNCER is None,
                    reason="PgBouncer is not installed (apt-get install -y pgbouncer)")
async def test_bounds_hold_behind_a_transaction_pooler_and_do_not_leak(
        database_url: str, postgres: Any) -> None:
    database = database_url.split("?")[0].rsplit("/", 1)[1]
    with pgbouncer(postgres.uri(), pool_size=1) as bouncer:  # one server connection for all
        url = bouncer.url(database, "postgres", "application_name=pooled")
        pool = await create_pool(url, maxsize=2)
        try:
            assert await current(pool, "statement_timeout") == "5min"
            with statements_bounded(0.2), pytest.raises(StatementTimeout):
                async with cursor(pool) as cur:
                    await cur.execute("SELECT pg_sleep(3)")
            async with transaction(pool) as cur:
                assert await fetch_one(cur, "SHOW statement_timeout") == {
                    "statement_timeout": "5min"}
        finally:
            pool.close()
            await pool.wait_closed()
        other = psycopg2.connect(url)  # the next client of that one server connection
        try:
            with other.cursor() as cur:
                cur.execute("SHOW statement_timeout")
                assert cur.fetchone() == ("0",)
        finally:
            other.close()
