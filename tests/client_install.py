"""Real chat clients (npm CLIs) for the headless tests: found, or installed once, pinned.

CI installs them ahead (``.ci/run``) into CLIENTS_DIR; a developer machine gets them on the
first run. A test skips, saying why, only when the CLI can neither be found nor installed.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

CLIENTS_DIR = Path(os.environ.get("PAWWAKE_CLIENTS_DIR")
                   or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
                   / "pawwake-clients")
INSTALL_SECONDS = 600


def npm_cli(package: str, version: str, command: str) -> Path:
    """The path of ``command`` from ``package@version`` in CLIENTS_DIR, installing it when
    missing; skips the calling test when it cannot be had."""
    binary = CLIENTS_DIR / "node_modules" / ".bin" / command
    manifest = CLIENTS_DIR / "node_modules" / package / "package.json"
    if binary.exists() and f'"version": "{version}"' in _read(manifest):
        return binary
    CLIENTS_DIR.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(CLIENTS_DIR),
             f"{package}@{version}"], capture_output=True, text=True, timeout=INSTALL_SECONDS)
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"{package}@{version} could not be installed ({type(exc).__name__}); "
                    "install Node.js and npm, or run .ci/run")
    if done.returncode != 0 or not binary.exists():
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        pytest.skip(f"npm install {package}@{version} failed: {tail[0]}")
    return binary


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return ""
