"""Real gateway processes (``python pawwake.py``) for tests that need several of them on one
database, or one that is killed: each with a port, a data folder and a log of its own."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import psutil

from pawwake.settings import BY_NAME

ROOT = Path(__file__).resolve().parent.parent
READY_SECONDS = 90.0
UNTIL_SECONDS = READY_SECONDS


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class GatewayProcess:
    """One ``python pawwake.py`` on loopback. The environment holds no setting of the test
    runner's own: only ``settings`` (names of the settings table, values as strings)."""

    def __init__(self, data_dir: Path, settings: dict[str, str], *, name: str = "gateway",
                 port: int | None = None) -> None:
        self.data_dir = data_dir
        self.name = name
        self.port = port or free_port()
        unknown = sorted(set(settings) - set(BY_NAME))
        assert not unknown, f"not settings: {unknown}"
        self.env = {k: v for k, v in os.environ.items() if k not in BY_NAME}
        self.env.update({"PAWWAKE_DATA_DIR": str(data_dir), "LOG_LEVEL": "INFO", **settings})
        self.log_path = data_dir.parent / f"{name}.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> GatewayProcess:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log_file:
            self.process = subprocess.Popen(
                [sys.executable, "pawwake.py", "--host", "127.0.0.1", "--port", str(self.port)],
                cwd=ROOT, env=self.env, stdout=log_file, stderr=subprocess.STDOUT)
        return self

    async def until_ready(self) -> dict[str, Any]:
        """Wait until ``GET /`` says the database is ready; returns that health body."""
        async with asyncio.timeout(READY_SECONDS), aiohttp.ClientSession() as session:
            while True:
                assert self.process is not None and self.process.poll() is None, self.log()
                with contextlib.suppress(aiohttp.ClientError, OSError):
                    async with session.get(self.base_url + "/") as response:
                        body: dict[str, Any] = await response.json()
                        if body["database"] == "ready":
                            return body
                await asyncio.sleep(0.1)

    def kill(self) -> None:
        """``kill -9``: no shutdown work of any kind."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def stop(self, timeout: float = READY_SECONDS) -> int | None:
        """SIGTERM and wait; the exit code (None when it was not running)."""
        if self.process is None or self.process.poll() is not None:
            return None if self.process is None else self.process.returncode
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:] if self.log_path.exists() \
            else ""


async def start_all(*gateways: GatewayProcess) -> None:
    """Start every gateway at once and wait until all are ready."""
    for gateway in gateways:
        gateway.start()
    await asyncio.gather(*(gateway.until_ready() for gateway in gateways))


def stop_all(*gateways: GatewayProcess, timeout: float = READY_SECONDS) -> None:
    """SIGTERM every gateway at once, then wait for each (killed when it overstays)."""
    for gateway in gateways:
        if gateway.process is not None and gateway.process.poll() is None:
            gateway.process.send_signal(signal.SIGTERM)
    for gateway in gateways:
        gateway.stop(timeout)


def postmasters(pgdata: Path) -> list[psutil.Process]:
    """Running postgres server processes (not their children) on ``pgdata``."""
    found = []
    for process in psutil.process_iter(["name", "cmdline", "status"]):
        info = process.info
        if info["name"] != "postgres" or info["status"] == psutil.STATUS_ZOMBIE:
            continue
        if str(pgdata) in " ".join(info["cmdline"] or []):
            found.append(process)
    return found


def postmaster_pid(pgdata: Path) -> int | None:
    """The first line of ``postmaster.pid``: the server's pid while it runs."""
    with contextlib.suppress(OSError, IndexError, ValueError):
        return int((pgdata / "postmaster.pid").read_text().splitlines()[0])
    return None


class Gateway:
    """One ``python pawwake.py`` process on a data folder."""

    def __init__(self, data_dir: Path, number: int, **extra_env: str) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if k not in BY_NAME}
        env.update({"API_BASE_URL": f"http://127.0.0.1:{free_port()}/v1",
                    "API_KEY": "sk-test", "DEFAULT_MODEL": "test/model",
                    "PAWWAKE_DATA_DIR": str(data_dir), "MEMORY_ENABLED": "false",
                    "CONVERSATION_RECALL_ENABLED": "false", "LOG_LEVEL": "INFO",
                    **extra_env})
        self.log_path = data_dir / f"gateway-{number}.log"
        data_dir.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("wb") as log_file:
            self.process = subprocess.Popen(
                [sys.executable, "pawwake.py", "--host", "127.0.0.1", "--port", str(self.port)],
                cwd=ROOT, env=env, stdout=log_file, stderr=subprocess.STDOUT)

    async def until_ready(self, state: str = "ready") -> dict[str, Any]:
        """GET / once its database state is ``state``."""
        async with asyncio.timeout(UNTIL_SECONDS), aiohttp.ClientSession() as session:
            while True:
                assert self.process.poll() is None, self.log()
                with contextlib.suppress(aiohttp.ClientError, OSError):
                    async with session.get(f"{self.base}/") as response:
                        body: dict[str, Any] = await response.json()
                        if body["database"] == state:
                            return body
                await asyncio.sleep(0.1)

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()

    def terminate(self) -> None:
        self.process.send_signal(signal.SIGTERM)

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(UNTIL_SECONDS)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")
