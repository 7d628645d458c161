"""An external DATABASE_URL: libpq parameters in the query string, and a transaction-mode
pooler (PgBouncer) in front of the server.

The README tells users of a hosted PostgreSQL to append ``?sslmode=require``. The test's
embedded server listens on a unix socket without TLS, so ``require`` would be refused by
libpq there; ``sslmode=prefer`` and ``sslmode=disable`` go through the very same path (the
URL is handed to libpq unchanged) and are accepted, together with ``application_name`` and
``connect_timeout``, which prove the parameters reach the server."""

from __future__ import annotations

import asyncio
import logging
from typing import Any
from urllib.parse import urlsplit

import pytest

from pawwake.db.pool import cursor, fetch_all, fetch_one
from pawwake.services import services_of
from tests.gateway_support import chat_body, settle
from tests.pgbouncer_support import PGBOUNCER, pgbouncer

KEY = "external-db-gateway-key-0123456789"
HEADERS = {"X-Gateway-Key": KEY}
SETTINGS = {"GATEWAY_SECRET": KEY, "JOB_WORKERS": 0, "MEMORY_ENABLED": True,
            "MEMORY_VECTOR_ENABLED": False, "MEMORY_EXTRACT_INTERVAL": 0}


def with_params(url: str, params: str) -> str:
    return url + ("&" if "?" in url else "?") + params


async def chat_and_remember(client: Any, upstream: Any, count: int) -> None:
    """Chats (the stored turns) and memory writes, interleaved and concurrent."""
    async def chat(n: int) -> None:
        response = await client.post("/v1/chat/completions", headers=HEADERS,
                                     json=chat_body(f"第{n}个问题：小橘今天吃什么"))
        assert response.status == 200, await response.text()
        await response.read()

    async def remember(n: int) -> None:
        response = await client.post("/api/memories", headers=HEADERS,
                                     json={"content": f"用户的猫小橘第{n}条记忆", "importance": 5})
        assert response.status == 201, await response.text()

    for n in range(count):
        upstream.reply_text(f"回答{n}")
    await asyncio.gather(*(chat(n) for n in range(count)), *(remember(n) for n in range(count)))
    await settle(client)


@pytest.mark.parametrize("params", [
    "sslmode=prefer&application_name=pawwake-ext&connect_timeout=10",
    "sslmode=disable&application_name=pawwake-ext&connect_timeout=10",
])
async def test_a_database_url_with_libpq_parameters(make_client: Any, database_url: str,
                                                    upstream: Any, params: str) -> None:
    client = await make_client(**SETTINGS, DATABASE_URL=with_params(database_url, params))
    health = await (await client.get("/")).json()
    assert (health["database"], health["database_kind"]) == ("ready", "external")
    pool = services_of(client.server.app).database.pool
    async with cursor(pool) as cur:
        row = await fetch_one(cur, "SELECT current_setting('application_name') AS name")
    assert row == {"name": "pawwake-ext"}
    await chat_and_remember(client, upstream, 3)
    async with cursor(pool) as cur:
        stored = await fetch_all(cur, "SELECT role FROM conversations")
    assert len(stored) == 6
    async with cursor(pool) as cur:
        assert len(await fetch_all(cur, "SELECT id FROM memories")) == 3


@pytest.mark.skipif(PGBOUNCER is None,
                    reason="PgBouncer is not installed (apt-get install -y pgbouncer)")
async def test_through_a_transaction_mode_pooler(make_client: Any, database_url: str,
                                                 upstream: Any, postgres: Any,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    database = urlsplit(database_url).path.lstrip("/")
    with pgbouncer(postgres.uri(), pool_size=2) as bouncer:
        url = bouncer.url(database, "postgres",
                          "sslmode=prefer&application_name=pawwake-pooled&connect_timeout=10")
        with caplog.at_level(logging.WARNING):
            client = await make_client(**SETTINGS, DATABASE_URL=url,
                                       CACHE_PARTITION_ENABLED=True)
            health = await (await client.get("/")).json()
            assert (health["database"], health["database_kind"]) == ("ready", "external")
            pool = services_of(client.server.app).database.pool
            await chat_and_remember(client, upstream, 6)
            await chat_and_remember(client, upstream, 6)
            # A second process on the same pooler starts (its migration lock is not stuck).
            second = await make_client(**SETTINGS, DATABASE_URL=url)
            await chat_and_remember(second, upstream, 2)
            async with cursor(pool) as cur:
                messages = await fetch_all(cur, "SELECT role FROM conversations")
                memories = await fetch_all(cur, "SELECT id FROM memories")
            await second.close()
            await client.close()
        log = bouncer.log_text()
    assert len(messages) == 28 and len(memories) == 14
    assert "prepared statement" not in log.lower()
    problems = [r.getMessage() for r in caplog.records
                if r.name.startswith("pawwake") and ("prepared" in r.getMessage().lower()
                                                     or "psycopg2" in r.getMessage())]
    assert problems == []
    assert "127.0.0.1" in log  # the connections went through PgBouncer
