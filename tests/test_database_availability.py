"""The database going away and coming back: /api answers 503, the pool recovers after a
PostgreSQL restart, and a gateway started without its database forwards chat, then switches
to full mode by itself once the database appears."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiopg
import pytest
from aiohttp.test_utils import TestClient

from pawwake.db import jobs as jobs_db
from pawwake.db.embedded import start_embedded, stop_embedded
from pawwake.db.errors import DatabaseUnavailable
from pawwake.db.pool import (
    UNAVAILABLE_ERRORS,
    ConnectionLost,
    connection,
    create_pool,
    cursor,
    execute,
    fetch_all,
)
from pawwake.jobs import Job
from pawwake.services import services_of
from tests.conftest import PostgresHandle
from tests.dashboard_support import PASSWORD, SECRET, login
from tests.fake_upstream import FakeUpstream
from tests.gateway_support import GatewayStarter, chat_body, settle

UNTIL_SECONDS = 60.0  # upper bound for things that happen in the background


class OwnServer:
    """An embedded PostgreSQL of this test alone, so it can be stopped and started."""

    def __init__(self) -> None:
        self.data_dir = Path(tempfile.mkdtemp(prefix="pawwake-test-own-pg-"))
        self.server: Any = start_embedded(self.data_dir)
        self.uri = self.server.get_uri()

    def stop(self) -> None:
        stop_embedded(self.server)
        self.server = None

    def start(self) -> None:
        self.server = start_embedded(self.data_dir)
        assert self.server.get_uri() == self.uri


@pytest.fixture
def own_server() -> Iterator[OwnServer]:
    own = OwnServer()
    try:
        yield own
    finally:
        if own.server is not None:
            own.stop()
        shutil.rmtree(own.data_dir, ignore_errors=True)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def health(client: TestClient) -> dict[str, Any]:
    response = await client.get("/")
    assert response.status == 200
    return await response.json()


async def until_state(client: TestClient, state: str) -> dict[str, Any]:
    """GET / until it reports ``state`` (the switch happens in the background)."""
    async with asyncio.timeout(UNTIL_SECONDS):
        while True:
            body = await health(client)
            if body["database"] == state:
                return body
            await asyncio.sleep(0.05)


async def assert_unavailable(response: Any) -> None:
    assert response.status == 503, await response.text()
    body = await response.json()
    assert body["error"]["code"] == "database_unavailable"
    assert "Traceback" not in body["error"]["message"]


async def test_api_answers_503_while_postgres_is_stopped_and_recovers_after_restart(
        gateway: GatewayStarter, own_server: OwnServer) -> None:
    client = await gateway(DATABASE_URL=own_server.uri, DASHBOARD_PASSWORD=PASSWORD,
                           SESSION_SECRET=SECRET)
    assert (await client.get("/api/memories")).status == 200
    assert (await health(client))["database"] == "ready"
    assert (await login(client)).status == 303

    own_server.stop()
    await assert_unavailable(await client.get("/api/memories"))
    await assert_unavailable(await client.post("/api/memories", json={"content": "喜欢猫"}))
    await assert_unavailable(await client.get("/api/conversations"))
    assert (await health(client))["database"] == "unavailable"
    page = await client.get("/dashboard/memories")
    assert page.status == 503
    assert "暂时连不上数据库" in await page.text() and "Traceback" not in await page.text()
    fragment = await client.get("/dashboard/memories", headers={"HX-Request": "true"})
    assert fragment.status == 503 and fragment.headers["HX-Retarget"] == "#flash"
    assert "暂时连不上数据库" in await fragment.text()
    status = await client.get("/dashboard")
    assert status.status == 200
    assert 'data-state="unavailable"' in await status.text()

    own_server.start()
    # The connections the restart broke are dropped; the very next request works.
    created = await client.post("/api/memories", json={"content": "喜欢猫"})
    assert created.status == 201, await created.text()
    assert (await client.get("/api/memories")).status == 200
    await until_state(client, "ready")


async def test_settings_saves_are_refused_until_the_database_is_here(
        gateway: GatewayStarter) -> None:
    url = f"postgresql://postgres@127.0.0.1:{closed_port()}/pawwake?connect_timeout=2"
    client = await gateway(DATABASE_URL=url)
    response = await client.put("/api/settings", json={"MEMORY_ENABLED": False})
    await assert_unavailable(response)


async def test_unreachable_database_at_startup_forwards_then_switches_to_full_mode(
        gateway: GatewayStarter, upstream: FakeUpstream, postgres: PostgresHandle) -> None:
    # First nothing listens at the address: the gateway starts anyway.
    unreachable = f"postgresql://postgres@127.0.0.1:{closed_port()}/pawwake?connect_timeout=2"
    client = await gateway(persona="file persona", DATABASE_URL=unreachable,
                           DASHBOARD_PASSWORD=PASSWORD, SESSION_SECRET=SECRET)
    body = await health(client)
    assert body["database"] == "unavailable"
    assert (body["memory"], body["partition"], body["recall"]) == (False, False, False)
    upstream.reply_text("forwarded while the database is away", pieces=1)
    response = await client.post("/v1/chat/completions", json=chat_body())
    assert response.status == 200
    assert b"forwarded while the database is away" in await response.read()
    assert upstream.requests[-1].body["messages"][0] == {"role": "system",
                                                         "content": "file persona"}
    await assert_unavailable(await client.get("/api/memories"))
    await assert_unavailable(await client.get("/api/partition/status"))
    assert (await login(client)).status == 303
    page = await (await client.get("/dashboard")).text()
    assert 'data-state="unavailable"' in page
    assert 'data-fact="database-error">OperationalError<' in page
    assert "自动切换到完整模式" in page or "自动重试" in page
    await settle(client)


async def test_partition_mode_answers_503_until_the_database_is_here(
        gateway: GatewayStarter, upstream: FakeUpstream) -> None:
    # Partition mode builds the context from the database: never a reply without it.
    url = f"postgresql://postgres@127.0.0.1:{closed_port()}/pawwake?connect_timeout=2"
    client = await gateway(DATABASE_URL=url, CACHE_PARTITION_ENABLED=True)
    response = await client.post("/v1/chat/completions", json=chat_body())
    assert response.status == 503
    assert (await response.json())["error"]["code"] == "partition_database_unavailable"
    assert upstream.requests == []


async def test_late_database_brings_memory_jobs_and_saved_settings(
        gateway: GatewayStarter, upstream: FakeUpstream, postgres: PostgresHandle) -> None:
    # A database that does not exist yet: every attempt fails until it is created.
    name = f"t_late_{os.getpid()}"
    postgres.admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    client = await gateway(persona="file persona", DATABASE_URL=postgres.uri(name),
                           MEMORY_ENABLED=False, JOB_WORKERS=1)
    app = client.server.app
    assert (await health(client))["database"] == "unavailable"
    ran = asyncio.Event()

    async def handler(job: Job) -> None:
        ran.set()

    services_of(app).jobs.register("late-wake", handler)
    upstream.reply_text("before", pieces=1)
    assert (await client.post("/v1/chat/completions", json=chat_body("早"))).status == 200
    await settle(client)
    try:
        # The database appears, already holding a saved hot setting (memory on): made under
        # another name and renamed, so the gateway's retries never meet it without the value.
        staging = f"{name}_staging"
        postgres.admin(f"DROP DATABASE IF EXISTS {staging} WITH (FORCE)")
        postgres.admin(f"CREATE DATABASE {staging} TEMPLATE pawwake_template")
        await _save_setting(postgres.uri(staging), "MEMORY_ENABLED", "true")
        postgres.admin(f"ALTER DATABASE {staging} RENAME TO {name}")
        body = await until_state(client, "ready")
        assert body["memory"] is True  # the value saved in the database, not the env's
        assert (await client.get("/api/memories")).status == 200

        async with cursor(services_of(app).database.pool) as cur:
            await jobs_db.enqueue(cur, "late-wake", {})
        services_of(app).jobs.wake()
        await asyncio.wait_for(ran.wait(), UNTIL_SECONDS)

        upstream.reply_text("after", pieces=1)
        response = await client.post("/v1/chat/completions", json=chat_body("晚上好"))
        assert response.status == 200
        await response.read()
        await settle(client)
        async with cursor(services_of(app).database.pool) as cur:
            stored = await fetch_all(cur,
                                     "SELECT role, content FROM conversations ORDER BY id")
        assert {"role": "user", "content": "晚上好"} in stored
    finally:
        await client.close()
        for left in (name, f"{name}_staging"):
            postgres.admin(f"DROP DATABASE IF EXISTS {left} WITH (FORCE)")


async def _save_setting(uri: str, name: str, raw_json: str) -> None:
    from pawwake.db.pool import create_pool

    pool = await create_pool(uri, maxsize=1)
    try:
        async with cursor(pool) as cur:
            await execute(cur, "INSERT INTO gateway_config (key, value) VALUES (%s, %s::jsonb)",
                          (name, raw_json))
    finally:
        pool.close()
        await pool.wait_closed()


async def test_shutdown_while_reconnecting_is_prompt(gateway: GatewayStarter) -> None:
    url = f"postgresql://postgres@127.0.0.1:{closed_port()}/pawwake?connect_timeout=2"
    client = await gateway(DATABASE_URL=url)
    assert (await health(client))["database"] == "unavailable"
    await client.close()  # the reconnect loop is cancelled, not waited out
    assert services_of(client.server.app).database.ready is False


async def test_a_malformed_url_is_retried_and_its_password_never_logged(
        gateway: GatewayStarter, caplog: pytest.LogCaptureFixture) -> None:
    # libpq echoes the bad token of a malformed URL, here the password itself.
    url = f"postgresql://postgres:s3cret%zz@127.0.0.1:{closed_port()}/pawwake"
    client = await gateway(DATABASE_URL=url)
    assert (await health(client))["database"] == "unavailable"
    assert "could not open the database" in caplog.text
    assert "s3cret" not in caplog.text


async def test_a_pool_that_cannot_hand_out_a_connection_in_time_is_unavailable(
        database_url: str) -> None:
    pool = await aiopg.create_pool(database_url, minsize=1, maxsize=1, timeout=0.2)
    try:
        async with connection(pool):
            with pytest.raises(DatabaseUnavailable) as caught:
                async with cursor(pool) as cur:
                    await fetch_all(cur, "SELECT 1")
        assert isinstance(caught.value, TimeoutError)  # older handlers still catch it
        assert isinstance(caught.value, UNAVAILABLE_ERRORS)
        async with cursor(pool) as cur:
            assert await fetch_all(cur, "SELECT 1 AS one") == [{"one": 1}]
    finally:
        pool.close()
        await pool.wait_closed()


async def test_a_statement_whose_answer_never_comes_is_the_database_away(
        database_url: str) -> None:
    """aiopg gives up waiting for an answer with a plain TimeoutError (and closes the
    connection): above the pool that is the database away, 503 and spooled like the rest,
    while a deadline of the caller's own inside the block stays what it was."""
    pool = await create_pool(database_url, maxsize=2)
    try:
        with pytest.raises(ConnectionLost) as caught:
            async with cursor(pool) as cur:
                await cur.execute("SELECT pg_sleep(5)", timeout=0.3)
        assert isinstance(caught.value, UNAVAILABLE_ERRORS)
        assert isinstance(caught.value.__cause__, TimeoutError)
        with pytest.raises(TimeoutError) as own:
            async with cursor(pool) as cur:
                await fetch_all(cur, "SELECT 1")
                raise TimeoutError("the caller's own deadline")
        assert not isinstance(own.value, UNAVAILABLE_ERRORS)
        async with cursor(pool) as cur:
            assert await fetch_all(cur, "SELECT 1 AS one") == [{"one": 1}]
    finally:
        pool.close()
        await pool.wait_closed()
