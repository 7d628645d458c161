"""Two real gateway processes on one database: what one replica writes, deletes or saves, the
other serves within seconds, and what must happen once happens once across both."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import psycopg2
import pytest
import pytest_asyncio
from aiohttp.test_utils import TestServer

from pawwake.dashboard.login_throttle import LoginThrottle
from tests.conditions import until_answered
from tests.conftest import PostgresHandle
from tests.fake_upstream import FakeUpstream
from tests.gateway_process import GatewayProcess, start_all, stop_all
from tests.pgbouncer_support import PGBOUNCER, pgbouncer

pytestmark = pytest.mark.asyncio(loop_scope="module")

KEY = "fleet-gateway-key-0123456789abcdef"
HEADERS = {"X-Gateway-Key": KEY}
PASSWORD = "fleet-dashboard-password"
SESSION_SECRET = "fleet-session-secret-0123456789abcdef-0123456789"
LOGIN_MAX_FAILURES = LoginThrottle().max_failures
SETTINGS_SEEN_SECONDS = 6.0
CLIENT_POOL = 4  # DATABASE_POOL_SIZE of each replica
SERVER_POOL = 3  # PgBouncer's server connections for both: fewer than the replicas' pools  # a save is in force on every replica within this long


def replica_settings(database_url: str, upstream_url: str, **extra: str) -> dict[str, str]:
    return {"DATABASE_URL": database_url, "API_BASE_URL": upstream_url,
            "API_KEY": "sk-upstream-0123456789", "DEFAULT_MODEL": "test/model-a",
            "GATEWAY_SECRET": KEY, "DASHBOARD_PASSWORD": PASSWORD,
            "SESSION_SECRET": SESSION_SECRET, "MEMORY_ENABLED": "true",
            "MEMORY_EXTRACT_INTERVAL": "0", "MEMORY_DESCRIBE": "false",
            "EMBEDDING_PROVIDER": "local",
            "VECTOR_BACKEND": "numpy", "JOB_WORKERS": "1", "TRUSTED_PROXIES": "127.0.0.1",
            "DATABASE_POOL_SIZE": str(CLIENT_POOL), **extra}


class Fleet:
    def __init__(self, replicas: list[GatewayProcess], session: aiohttp.ClientSession,
                 upstream: FakeUpstream, postgres: PostgresHandle, database: str) -> None:
        self.replicas = replicas
        self.http = session
        self.upstream = upstream
        self.postgres = postgres
        self.database = database

    def server_connections(self) -> int:
        """Connections the server holds for the fleet's database (the test's own aside)."""
        conn = psycopg2.connect(self.postgres.uri(self.database))
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s"
                            " AND pid <> pg_backend_pid()", (self.database,))
                return int(cur.fetchone()[0])
        finally:
            conn.close()

    async def call(self, replica: int, method: str, path: str, **kwargs: Any) -> Any:
        return await self.call_gateway(self.replicas[replica], method, path, **kwargs)

    async def call_gateway(self, gateway: GatewayProcess, method: str, path: str,
                           **kwargs: Any) -> Any:
        async with self.http.request(method, gateway.base_url + path, headers=HEADERS,
                                     **kwargs) as response:
            body = await response.json()
            assert response.status < 300, (response.status, body)
            return body


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def fleet(postgres: PostgresHandle, tmp_path_factory: pytest.TempPathFactory
                ) -> AsyncIterator[Fleet]:
    """Two replicas, a fake provider and a database shared by this module's tests (starting
    the processes once saves seconds a test); each test keeps to its own rows and clients.
    The replicas reach the database through PgBouncer in transaction mode when it is
    installed, with fewer server connections than their pools hold, as on a small managed
    PostgreSQL behind its pooler."""
    assert postgres.supply is not None
    database = postgres.supply.take()
    upstream = FakeUpstream()
    upstream.server = TestServer(upstream.build_app(), host="127.0.0.1")
    await upstream.server.start_server()
    folder = tmp_path_factory.mktemp("fleet")
    with contextlib.ExitStack() as stack:
        url = postgres.uri(database)
        if PGBOUNCER is not None:
            bouncer = stack.enter_context(pgbouncer(postgres.uri(), pool_size=SERVER_POOL))
            url = bouncer.url(database, "postgres", "application_name=pawwake-fleet")
        replicas = [GatewayProcess(folder / f"data-{n}", replica_settings(
            url, upstream.base_url), name=f"replica-{n}") for n in range(2)]
        try:
            await start_all(*replicas)
            async with aiohttp.ClientSession() as session:
                yield Fleet(replicas, session, upstream, postgres, database)
        finally:
            stop_all(*replicas)
            await upstream.server.close()
    postgres.supply.drop(database)


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

    async def found_with_its_vector(replica: int) -> bool:
        results = await search(fleet, replica, "小橘喜欢吃什么")
        return any(r["id"] == memory_id and r["similarity"] is not None for r in results)

    # The writer embeds it first (its local model may still be loading: not what is timed),
    # then the other replica serves it within seconds.
    await until_answered(lambda: found_with_its_vector(0), interval=0.2)
    assert await until_answered(lambda: found_with_its_vector(1), interval=0.2) < 10
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


async def sign_in(fleet: Fleet, replica: int, password: str, address: str) -> int:
    """One sign-in from ``address`` (the replicas trust loopback's X-Forwarded-For, as behind
    a load balancer), without any cookie."""
    base = fleet.replicas[replica].base_url
    async with fleet.http.post(base + "/dashboard/login", data={"password": password},
                               headers={"Origin": base, "X-Forwarded-For": address},
                               allow_redirects=False) as response:
        return response.status


async def test_failed_sign_ins_count_across_replicas(fleet: Fleet) -> None:
    """A guesser sent round-robin by a load balancer gets one budget, not one per replica."""
    guesser = "203.0.113.9"
    guesses = [sign_in(fleet, n % 2, "a-wrong-guess", guesser)
               for n in range(LOGIN_MAX_FAILURES)]
    assert await asyncio.gather(*guesses) == [401] * LOGIN_MAX_FAILURES
    assert [await sign_in(fleet, n, PASSWORD, guesser) for n in (0, 1)] == [429, 429]
    assert await sign_in(fleet, 1, PASSWORD, "198.51.100.20") == 303  # anyone else signs in


async def test_a_logout_through_one_replica_ends_the_session_on_the_other(fleet: Fleet) -> None:
    a, b = (replica.base_url for replica in fleet.replicas)
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as browser:
        async with browser.post(a + "/dashboard/login", data={"password": PASSWORD},
                                headers={"Origin": a}, allow_redirects=False) as response:
            assert response.status == 303
        copied = {c.key: c.value for c in browser.cookie_jar}
        async with browser.get(b + "/dashboard", allow_redirects=False) as response:
            assert response.status == 200  # one session for the whole fleet
        async with browser.post(a + "/dashboard/logout", headers={"Origin": a},
                                allow_redirects=False) as response:
            assert response.status == 303
    async with aiohttp.ClientSession(cookies=copied,
                                     cookie_jar=aiohttp.CookieJar(unsafe=True)) as replay:
        async with replay.get(b + "/dashboard", allow_redirects=False) as response:
            assert response.status == 303
            assert "/dashboard/login" in response.headers["Location"]


async def stream_chat(fleet: Fleet, replica: int | GatewayProcess, text: str,
                      session_id: str) -> str:
    """A streamed chat through ``replica``; the text the client read."""
    body = {"model": "test/model-a", "stream": True,
            "messages": [{"role": "user", "content": text}]}
    gateway = fleet.replicas[replica] if isinstance(replica, int) else replica
    url = gateway.base_url + "/v1/chat/completions"
    async with fleet.http.post(url, json=body, headers={
            **HEADERS, "X-Session-Id": session_id}) as response:
        assert response.status == 200, await response.text()
        return (await response.read()).decode()


async def test_a_due_reminder_reaches_the_model_once_across_replicas(fleet: Fleet) -> None:
    reminder = "提醒用户下午三点给小橘打疫苗"
    await fleet.call(0, "POST", "/api/memories", json={
        "content": reminder, "remind_at": "2020-01-01T08:00:00+08:00"})
    sent_before = len(fleet.upstream.requests)
    chats = [stream_chat(fleet, n % 2, f"今天第{n}件事做什么", f"reminder-{n}") for n in range(4)]
    await asyncio.gather(*chats)
    await stream_chat(fleet, 1, "还有别的事吗", "reminder-later")
    line = re.compile(r"\[提醒 [^\]]*\] " + reminder)
    bodies = [json.dumps(r.body, ensure_ascii=False) for r in fleet.upstream.requests[sent_before:]]
    delivered = [body for body in bodies if line.search(body)]
    # One request delivers it, and says it once (not also as a memory); once delivered it may
    # come back as an ordinary memory, never as a reminder again.
    assert len(delivered) == 1
    assert delivered[0].count(reminder) == 1
    if PGBOUNCER is not None:  # both replicas' pools went through SERVER_POOL connections
        assert fleet.server_connections() <= SERVER_POOL


@pytest.mark.skipif(PGBOUNCER is None, reason="PgBouncer is not installed")
async def test_a_replica_killed_with_spooled_turns_writes_them_once_when_it_returns(
        fleet: Fleet, tmp_path: Path) -> None:
    """Its path to the database is cut (its own PgBouncer stops), a chat finishes into its
    spool, it is killed with ``kill -9``; back on the same data folder, it writes the turn."""
    with pgbouncer(fleet.postgres.uri(), pool_size=2) as path:
        url = path.url(fleet.database, "postgres", "application_name=pawwake-returning")
        replica = GatewayProcess(tmp_path / "data", replica_settings(url, fleet.upstream.base_url),
                                 name="returning")
        try:
            await start_all(replica)
            path.process.kill()
            path.process.wait()
            assert "[DONE]" in await stream_chat(fleet, replica, "记得带伞", "spooled-then-killed")
            health = await fleet.call_gateway(replica, "GET", "/")
            assert health["turn_spool"]["pending"] == 1
            replica.kill()
            with pgbouncer(fleet.postgres.uri(), pool_size=2, port=path.port):
                replica.start()
                await replica.until_ready()

                async def spool_written() -> bool:
                    return (await fleet.call_gateway(replica, "GET", "/"))["turn_spool"] == {
                        "pending": 0, "dropped": 0, "failed": 0}

                await until_answered(spool_written)
        finally:
            replica.stop()
    stored = await fleet.call(0, "GET", "/api/conversations/spooled-then-killed/messages")
    assert [(m["role"], m["content"]) for m in stored["messages"]] == [
        ("user", "记得带伞"), ("assistant", fleet.upstream.default_text)]
