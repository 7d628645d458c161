"""The embedded PostgreSQL across gateway deaths: after ``kill -9`` the next gateway adopts the
server left running, a clean shutdown stops it, and there is never a second server on the
data folder. Real processes: ``python pawwake.py`` with a data folder of the test's own."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.conftest import PostgresHandle
from tests.gateway_process import (
    UNTIL_SECONDS,
    Gateway,
    free_port,
    postmaster_pid,
    postmasters,
)


@pytest.fixture
def data_dir() -> Iterator[Path]:
    # Not under pytest's temp root (mode 0700 would lock out the server's system user).
    folder = Path(tempfile.mkdtemp(prefix="pawwake-test-lifecycle-"))
    try:
        yield folder
    finally:
        for process in postmasters(folder / "postgres"):
            process.kill()
        shutil.rmtree(folder, ignore_errors=True)


async def test_restart_after_kill_adopts_the_server_and_a_clean_stop_stops_it(
        data_dir: Path) -> None:
    pgdata = data_dir / "postgres"
    first = Gateway(data_dir, 1)
    try:
        await first.until_ready()
    finally:
        first.kill()  # kill -9: no cleanup of any kind
    left = postmaster_pid(pgdata)
    assert left is not None and psutil.pid_exists(left)
    assert [p.pid for p in postmasters(pgdata)] == [left]

    second = Gateway(data_dir, 2)
    try:
        await second.until_ready()
        assert [p.pid for p in postmasters(pgdata)] == [left]  # adopted, not doubled
        assert postmaster_pid(pgdata) == left
    finally:
        assert second.stop() == 0
    with contextlib.suppress(psutil.NoSuchProcess):
        psutil.Process(left).wait(UNTIL_SECONDS)
    assert postmasters(pgdata) == [], second.log()
    assert "embedded PostgreSQL stopped" in second.log()

    # And the folder starts cleanly again afterwards.
    third = Gateway(data_dir, 3)
    try:
        await third.until_ready()
        assert len(postmasters(pgdata)) == 1
    finally:
        assert third.stop() == 0
    assert postmasters(pgdata) == []


@pytest.mark.parametrize("someone_else", ["a sleep", "another folder's server"])
async def test_a_stale_postmaster_pid_naming_another_process_does_not_block_the_start(
        data_dir: Path, someone_else: str, postgres: PostgresHandle) -> None:
    pgdata = data_dir / "postgres"
    first = Gateway(data_dir, 1)
    try:
        await first.until_ready()
    finally:
        assert first.stop() == 0
    assert postmasters(pgdata) == []
    # As after a host or container restart: the pid file survived, and its pid now belongs
    # to some unrelated process, which must be neither mistaken for the server nor harmed.
    bystander = _bystander()
    other_pid = bystander.pid
    if someone_else == "another folder's server":
        other_pid = postgres.server.get_pid()
    try:
        lines = _last_pid_file(pgdata)
        lines[0] = str(other_pid)
        (pgdata / "postmaster.pid").write_text("\n".join(lines) + "\n")
        second = Gateway(data_dir, 2)
        try:
            await second.until_ready()
            assert len(postmasters(pgdata)) == 1
        finally:
            assert second.stop() == 0
        assert postmasters(pgdata) == []
        assert bystander.poll() is None
        assert psutil.pid_exists(other_pid)  # neither adopted nor harmed
    finally:
        bystander.kill()
        bystander.wait()


def _bystander() -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sleep", "600"])


def _last_pid_file(pgdata: Path) -> list[str]:
    """The lines of a postmaster.pid as a running server writes them (from its log-free
    shape: pid, folder, start time, port, socket dir, host, shared memory, status)."""
    return ["0", str(pgdata), "0", "5432", str(pgdata), "", "0 0", "ready"]


async def test_sigterm_while_reconnecting_to_an_unreachable_database_exits_cleanly(
        data_dir: Path) -> None:
    url = f"postgresql://postgres@127.0.0.1:{free_port()}/pawwake?connect_timeout=2"
    gateway = Gateway(data_dir, 1, DATABASE_URL=url)
    try:
        await gateway.until_ready("unavailable")
    finally:
        assert gateway.stop() == 0, gateway.log()
    assert "starting without the database" in gateway.log()
