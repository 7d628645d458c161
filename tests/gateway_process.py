"""Real gateway processes for tests: ``python pawwake.py`` on a data folder of the test's own,
and the embedded PostgreSQL it runs there."""

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

ROOT = Path(__file__).resolve().parents[1]
UNTIL_SECONDS = 90.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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
