"""Shared fixtures: one embedded PostgreSQL per run, a fresh database per test, the real app."""

from __future__ import annotations

import asyncio
import itertools
import os
import shutil
import tempfile
import threading
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
from tests.admin_sql import run_autocommit
from tests.fake_upstream import FakeUpstream, on_loopback
from tests.gateway_support import GatewayStarter

TEMPLATE_DB = "pawwake_template"
# One worker more than the cores (at most four): most tests wait on loopback, PostgreSQL and
# child processes, so a third worker on two cores took the suite from 2:41-2:42 to 2:29-2:33.
SUITE_WORKERS = min(4, (os.cpu_count() or 1) + 1)
_db_counter = itertools.count(1)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto`` (pyproject's addopts): the whole suite, or whole folders of it, on
    SUITE_WORKERS processes; named files or tests in this one process, which starts faster
    and loads the shared machine less. ``PYTEST_XDIST_AUTO_NUM_WORKERS`` still wins."""
    chosen = os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS")
    if chosen:
        return int(chosen)
    folders_only = all(Path(arg.split("::")[0]).is_dir() for arg in config.args)
    return SUITE_WORKERS if folders_only else 0


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Browser tests share one worker: two chromiums on two cores only slow each other."""
    for item in items:
        if item.get_closest_marker("browser") is not None:
            item.add_marker(pytest.mark.xdist_group("browser"))


class PostgresHandle:
    """The embedded server of this test run and helpers to make databases on it."""

    def __init__(self, server: Any) -> None:
        self.server = server
        self.supply: DatabaseSupply | None = None  # set once the template is migrated

    def uri(self, database: str = "postgres") -> str:
        return self.server.get_uri(database)

    def admin(self, sql: str) -> None:
        run_autocommit(self.uri(), sql)


class DatabaseSupply:
    """Fresh copies of the template, made ahead and dropped afterwards on threads of their own.

    A copy costs about 20 ms of server time and a drop up to 0.1 s (it waits for a
    checkpoint); most tests spend their time waiting on the loopback, so the next test's copy
    is made, and the last one's dropped, meanwhile instead of in their setup and teardown.
    Each test still gets a database nobody used before.
    """

    AHEAD = 3  # copies kept ready: enough for a run of fast tests, little disk
    CREATORS = 2  # a copy takes 20-80 ms on a busy machine, about as long as a fast test

    def __init__(self, handle: PostgresHandle) -> None:
        self._handle = handle
        self._ready: list[str] = []
        self._to_drop: list[str] = []
        self._making = 0  # copies being made right now
        self._failure: BaseException | None = None
        self._stopping = False
        self._changed = threading.Condition()
        self._creators = [threading.Thread(target=self._run, args=(self._create_next,),
                                           daemon=True, name=f"test-databases-create-{n}")
                          for n in range(self.CREATORS)]
        self._dropper = threading.Thread(target=self._run, args=(self._drop_next,),
                                         daemon=True, name="test-databases-drop")
        for thread in [*self._creators, self._dropper]:
            thread.start()

    def take(self) -> str:
        """The name of a fresh, migrated database, waiting for one if none is ready."""
        with self._changed:
            while not self._ready and self._failure is None:
                self._changed.wait()
            if self._failure is not None:
                raise RuntimeError("the test databases could not be made") from self._failure
            name = self._ready.pop(0)
            self._changed.notify_all()
            return name

    def drop(self, name: str) -> None:
        """Drop ``name`` soon (``WITH (FORCE)``: leftover connections go too)."""
        with self._changed:
            self._to_drop.append(name)
            self._changed.notify_all()

    def close(self) -> None:
        """Stop making copies, drop every copy left, and wait for the threads."""
        with self._changed:
            self._stopping = True
            self._changed.notify_all()
        self._dropper.join()

    def _create_next(self, cur: Any) -> bool:
        with self._changed:
            while self._making + len(self._ready) >= self.AHEAD and not self._stopping:
                self._changed.wait()
            if self._stopping:
                return False
            self._making += 1
        name = f"t_{os.getpid()}_{next(_db_counter)}"
        try:
            cur.execute(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE_DB}")
        finally:
            with self._changed:
                self._making -= 1
        with self._changed:
            self._ready.append(name)
            self._changed.notify_all()
        return True

    def _drop_next(self, cur: Any) -> bool:
        with self._changed:
            while not self._to_drop and not self._stopping:
                self._changed.wait()
            if not self._to_drop:
                return False
            name = self._to_drop.pop(0)
        cur.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        return True

    def _run(self, work: Callable[[Any], bool]) -> None:
        conn = psycopg2.connect(self._handle.uri())
        conn.autocommit = True
        try:
            with conn.cursor() as cur:
                while work(cur):
                    pass
                if work == self._drop_next:  # once the creators stop, their copies go too
                    for creator in self._creators:
                        creator.join()
                    for name in self._ready:
                        cur.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        except BaseException as exc:
            with self._changed:
                self._failure = exc
                self._changed.notify_all()
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
    handle.supply = DatabaseSupply(handle)
    yield handle
    handle.supply.close()
    stop_embedded(server)
    shutil.rmtree(data_dir, ignore_errors=True)


@pytest.fixture
def database_url(postgres: PostgresHandle) -> Iterator[str]:
    """A fresh, migrated database for one test (a copy of the template, made ahead)."""
    assert postgres.supply is not None
    name = postgres.supply.take()
    yield postgres.uri(name)
    postgres.supply.drop(name)


@pytest.fixture
async def upstream(aiohttp_server: Any) -> FakeUpstream:
    """A real HTTP server on loopback that speaks OpenAI's chat API, scripted per test."""
    return await on_loopback(FakeUpstream(), aiohttp_server)


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
            # Tests that script the memory model's answers turn this on themselves.
            "MEMORY_DESCRIBE": False,
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
