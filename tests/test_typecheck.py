"""The type checker runs with the suite, so a type error fails CI like a failed test.

mypy's settings live in pyproject.toml (``[tool.mypy]``: the ``pawwake`` package, strict
everywhere), so ``python -m mypy`` in the project folder gives the same report. The
launcher ``pawwake.py`` has the package's module name, so mypy checks a copy of it under
another name. The incremental cache sits in the temp folder, one per checkout: a run after
the first re-checks only what changed.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.xdist_group("mypy")  # both tests write one mypy cache folder

ROOT = Path(__file__).resolve().parent.parent
LAUNCHER = "pawwake.py"
CACHE = Path(tempfile.gettempdir()) / (
    "pawwake-mypy-" + hashlib.sha256(str(ROOT).encode()).hexdigest()[:12])


def run_mypy(*args: str) -> tuple[int, str]:
    """mypy's exit code (0 clean, 1 errors, 2 it could not run) and its report on ``args``
    (no arguments: the files named in pyproject.toml)."""
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(CACHE), "--no-color-output",
         "--no-error-summary", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    return result.returncode, (result.stdout + result.stderr).strip()


def test_package_type_checks() -> None:
    code, report = run_mypy()
    assert code == 0, f"mypy found errors:\n{report}"


def test_launcher_type_checks(tmp_path: Path) -> None:
    copy = tmp_path / "pawwake_launcher.py"
    shutil.copyfile(ROOT / LAUNCHER, copy)
    code, report = run_mypy(str(copy))
    assert code in (0, 1), report
    # the package's own errors are the test above's to report
    launcher_errors = [line.replace(str(copy), LAUNCHER) for line in report.splitlines()
                       if line.startswith(str(copy))]
    assert not launcher_errors, "mypy found errors:\n" + "\n".join(launcher_errors)


def test_every_package_is_checked_strictly() -> None:
    """Strict for the whole package, and no override of ours takes any of it back."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    assert config["strict"] is True and config["files"] == ["pawwake"]
    for override in config.get("overrides", []):
        modules = override["module"] if isinstance(override["module"], list) \
            else [override["module"]]
        assert not any(m.split(".")[0] == "pawwake" for m in modules), override
