"""Shared fixtures: one embedded PostgreSQL per run, a fresh database per test, the real app."""

from __future__ import annotations

import asyncio
import itertools
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg2
import pytest
from aiohttp.test_utils import TestClient

os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.mkdtemp(prefix="pawwake-run-"))

from pawwake.app import create_app
from pawwake.db.migrate import migrate
from pawwake.db.pool import create_pool, transaction
from pawwake.settings import Settings
from tests.fake_upstream import FakeUpstream
from tests.gateway_support import GatewayStarter

TEMPLATE_DB = "pawwake_template"
_db_counter = itertools.count(1)


class PostgresHandle:
    """The embedded server of this test run and helpers to make databases on it."""

    def __init__(self, server: Any) -> None:
        self.server = server

    def uri(self, database: str = "postgres") -> str:
        return self.server.get_uri(database)

    def admin(self, sql: str) -> None:
        conn = psycopg2.connect(self.uri())
        conn.autocommit = True
        try:
            with conn.cursor() as cur:
                cur.execute(sql)
        finally:
            conn.close()


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresHandle]:
    from pawwake.db.embedded import start_embedded, stop_embedded

    # Not under pytest's own temp root: pytest resets that folder to mode 0700 whenever a run
    # starts, which would lock out the server's unprivileged system user.
    data_dir = Path(tempfile.mkdtemp(prefix="pawwake-test-pg-"))
    server = start_embedded(data_dir)
    handle = PostgresHandle(server)
    # Test data is thrown away: skip the disk flushes that make CREATE DATABASE take a second.
    for setting in ("fsync", "synchronous_commit", "full_page_writes"):
        handle.admin(f"ALTER SYSTEM SET {setting} = off")
    handle.admin("SELECT pg_reload_conf()")
    handle.admin(f"DROP DATABASE IF EXISTS {TEMPLATE_DB}")
    handle.admin(f"CREATE DATABASE {TEMPLATE_DB}")

    async def migrate_template() -> None:
        pool = await create_pool(handle.uri(TEMPLATE_DB), maxsize=1)
        try:
            async with transaction(pool) as cur:
                await migrate(cur)
        finally:
            pool.close()
            await pool.wait_closed()

    asyncio.run(migrate_template())
    yield handle
    stop_embedded(server)
    shutil.rmtree(data_dir, ignore_errors=True)


@pytest.fixture
def database_url(postgres: PostgresHandle) -> Iterator[str]:
    """A fresh, migrated database for one test (a copy of the template: milliseconds)."""
    name = f"t_{os.getpid()}_{next(_db_counter)}"
    postgres.admin(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE_DB}")
    yield postgres.uri(name)
    postgres.admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
async def upstream(aiohttp_server: Any) -> FakeUpstream:
    """A real HTTP server on loopback that speaks OpenAI's chat API, scripted per test."""
    fake = FakeUpstream()
    fake.server = await aiohttp_server(fake.build_app())
    return fake


@pytest.fixture
def make_settings(database_url: str, upstream: FakeUpstream, tmp_path: Path
                  ) -> Callable[..., Settings]:
    """Settings for the real app pointed at this test's database and fake upstream."""

    def build(**overrides: Any) -> Settings:
        values: dict[str, Any] = {
            "DATABASE_URL": database_url,
            "API_BASE_URL": upstream.base_url,
            "API_KEY": "sk-upstream-test-key-0123456789",
            "DEFAULT_MODEL": "test/model-a",
            "PAWWAKE_DATA_DIR": str(tmp_path / "data"),
            "MEMORY_ENABLED": False,
        }
        values.update(overrides)
        return Settings.from_env({}, **values)

    return build


@pytest.fixture
async def make_client(make_settings: Callable[..., Settings], aiohttp_client: Any
                      ) -> Callable[..., Any]:
    """Start the real app with settings overrides and return a test client for it."""

    async def start(**overrides: Any) -> TestClient:
        return await aiohttp_client(create_app(make_settings(**overrides)))

    return start


@pytest.fixture
def gateway(make_settings: Callable[..., Settings], tmp_path: Path, aiohttp_client: Any
            ) -> GatewayStarter:
    """Start the real app with a persona file of the test's own (see gateway_support)."""
    return GatewayStarter(aiohttp_client, make_settings, tmp_path)


@pytest.fixture
async def client(make_client: Callable[..., Any]) -> AsyncIterator[TestClient]:
    yield await make_client()
