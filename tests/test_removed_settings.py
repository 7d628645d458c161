"""A removed setting still in the environment is named once at start-up, with what replaced
it, instead of being silently ignored."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from pawwake.removed_settings import warn_removed

ROOT = Path(__file__).resolve().parent.parent


def test_memory_extract_enabled_is_named_with_its_replacements(
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="pawwake.removed_settings"):
        found = warn_removed({"MEMORY_EXTRACT_ENABLED": "off-on-purpose",
                              "MEMORY_ENABLED": "true"})
    assert found == ["MEMORY_EXTRACT_ENABLED"]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    text = warnings[0].getMessage()
    assert "MEMORY_EXTRACT_ENABLED" in text and "ignored" in text
    assert "MEMORY_EXTRACT_INTERVAL=0" in text and "MAX_MEMORIES_INJECT=0" in text
    assert "off-on-purpose" not in text  # names only, never values


def test_nothing_is_logged_without_removed_settings(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="pawwake.removed_settings"):
        assert warn_removed({"MEMORY_ENABLED": "true"}) == []
    assert caplog.records == []


def test_the_gateway_says_it_once_at_start_up(tmp_path: Path, unused_tcp_port: int) -> None:
    """The real entry point, started as a process; the line appears once, before it serves."""
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path),
           "DATABASE_ENABLED": "false", "MEMORY_EXTRACT_ENABLED": "false",
           "PAWWAKE_DATA_DIR": str(tmp_path / "data"), "GATEWAY_SECRET": "x" * 32}
    log_path = tmp_path / "stderr.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, str(ROOT / "pawwake.py"), "--host", "127.0.0.1",
             "--port", str(unused_tcp_port)], cwd=ROOT, env=env, stdout=log, stderr=log)
    try:
        for _ in range(300):  # up to 30 s on a busy machine: readiness, not a timing claim
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{unused_tcp_port}/",
                                            timeout=1) as answer:
                    assert answer.status == 200
                    break
            except OSError:
                assert process.poll() is None, log_path.read_text()
                time.sleep(0.1)
        else:
            pytest.fail("the gateway did not start: " + log_path.read_text())
    finally:
        process.terminate()
        process.wait(timeout=30)
    lines = [line for line in log_path.read_text().splitlines()
             if "MEMORY_EXTRACT_ENABLED" in line]
    assert len(lines) == 1, lines
    assert "WARNING" in lines[0] and "MEMORY_EXTRACT_INTERVAL=0" in lines[0]
