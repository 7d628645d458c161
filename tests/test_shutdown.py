"""SIGTERM ends the real process in every state: an embedding running, a stream held open by
the provider, jobs running (it used to wait for the embedding thread for minutes, then got
SIGKILL). The 10-second goal is measured by bench/stall.py; here the wait is generous and the
exit code is what counts."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from pawwake.settings import SETTINGS
from tests.fake_upstream import Reply, text_stream

ROOT = Path(__file__).resolve().parent.parent
KEY = "gw-shutdown-test-key-0123456789"
HEADERS = {"X-Gateway-Key": KEY}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def gateway_env(upstream_url: str, data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {s.name for s in SETTINGS}}
    env.update({
        "API_BASE_URL": upstream_url, "API_KEY": "sk-upstream-0123456789",
        "DEFAULT_MODEL": "test/model-a", "GATEWAY_SECRET": KEY, "LOG_LEVEL": "INFO",
        "PAWWAKE_DATA_DIR": str(data_dir), "MEMORY_ENABLED": "true",
        "MEMORY_EXTRACT_INTERVAL": "0", "MEMORY_DESCRIBE": "false", "EMBEDDING_PROVIDER": "local",
        "JOB_WORKERS": "2", "XDG_RUNTIME_DIR": str(data_dir / "run"),
        "SHUTDOWN_GRACE_SECONDS": "2",
    })
    (data_dir / "run").mkdir(parents=True, exist_ok=True)
    return env


def tail_of(log_path: Path) -> str:
    return log_path.read_text(errors="replace")[-3000:]


def stop_orphan(data_dir: Path) -> None:
    """After a kill, stop the PostgreSQL server the killed gateway left running."""
    pid_file = data_dir / "postgres" / "postmaster.pid"
    if pid_file.exists():
        with contextlib.suppress(OSError, ValueError):
            os.kill(int(pid_file.read_text().splitlines()[0]), signal.SIGTERM)


async def wait_until_up(session: aiohttp.ClientSession, base: str,
                        process: asyncio.subprocess.Process, log_path: Path) -> None:
    async with asyncio.timeout(90):
        while True:
            assert process.returncode is None, tail_of(log_path)
            try:
                async with session.get(base + "/") as resp:
                    if resp.status < 500:
                        return
            except (aiohttp.ClientError, OSError):
                pass
            await asyncio.sleep(0.2)


@pytest.fixture
def data_dir() -> Iterator[Path]:
    """Outside pytest's own temporary tree: pytest makes that private (0700) whenever a
    session starts, and the embedded server runs as another user."""
    path = Path(tempfile.mkdtemp(prefix="pawwake-shutdown-"))
    yield path / "data"
    shutil.rmtree(path, ignore_errors=True)


async def test_sigterm_during_an_embedding_an_open_stream_and_jobs(
        tmp_path: Path, data_dir: Path, upstream: Any) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log_path = tmp_path / "gateway.log"
    with log_path.open("wb") as log_file:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "pawwake.py", "--host", "127.0.0.1", "--port", str(port),
            cwd=ROOT, env=gateway_env(upstream.base_url, data_dir), stdout=log_file,
            stderr=asyncio.subprocess.STDOUT)
    held = asyncio.Event()  # never set: the provider holds the stream open
    upstream.queue(Reply(chunks=text_stream("一直没说完的回复", pieces=3), gate=held,
                         gate_after=1))
    try:
        async with aiohttp.ClientSession() as session:
            await wait_until_up(session, base, process, log_path)
            text = "我记得的一件事：" + "今天去公园散步然后吃火锅晚上看电影。" * 40
            for number in range(60):  # a backfill of minutes with the local model
                async with session.post(base + "/api/memories", headers=HEADERS,
                                        json={"content": f"{number} {text}"}) as resp:
                    assert resp.status == 201, await resp.text()
            async with asyncio.timeout(60):
                while True:
                    async with session.get(base + "/api/admin/backfill-memory-embeddings/status",
                                           headers=HEADERS) as resp:
                        state = await resp.json()
                    if state["status"] == "running" and state["done"] > 0:
                        break
                    await asyncio.sleep(0.2)
            stream = await session.post(base + "/v1/chat/completions", headers=HEADERS, json={
                "model": "test/model-a", "stream": True,
                "messages": [{"role": "user", "content": "讲个很长的故事"}]})
            assert stream.status == 200
            await stream.content.readany()  # the first chunk came; the rest never will
            process.send_signal(signal.SIGTERM)
            async with asyncio.timeout(20):  # generous; bench/stall.py measures the 10 s goal
                code = await process.wait()
            stream.close()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
            stop_orphan(data_dir)
    output = tail_of(log_path)
    assert code == 0, output
    assert "embedded PostgreSQL stopped" in output
