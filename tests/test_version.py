"""One version everywhere: ``pawwake.__version__`` is what GET /, the dashboard footer,
pyproject.toml and the newest release heading of CHANGELOG.md say."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from bs4 import BeautifulSoup

from pawwake import __version__
from tests.dashboard_support import dashboard_client, login

ROOT = Path(__file__).resolve().parent.parent
SEMVER = re.compile(r"^\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.-]+)?$")
RELEASE_HEADING = re.compile(r"^## \[(?P<version>[^\]]+)\]", re.MULTILINE)


def newest_changelog_version() -> str | None:
    """The first ``## [x.y.z]`` heading (``[Unreleased]`` is not a release)."""
    for match in RELEASE_HEADING.finditer((ROOT / "CHANGELOG.md").read_text(encoding="utf-8")):
        if match["version"].lower() != "unreleased":
            return match["version"]
    return None


def test_the_version_is_a_semantic_version() -> None:
    assert SEMVER.match(__version__)


def test_pyproject_reads_the_version_from_the_package() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in project["project"]
    assert "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "pawwake.__version__"}


def test_changelog_names_the_same_version() -> None:
    newest = newest_changelog_version()
    if newest is None:
        pytest.skip("CHANGELOG.md has no release heading yet (only [Unreleased])")
    assert newest == __version__


async def test_health_and_dashboard_footer_report_the_package_version(make_client: Any) -> None:
    client = await dashboard_client(make_client)
    health = await (await client.get("/")).json()
    assert health["version"] == __version__
    assert (await login(client)).status == 303
    page = BeautifulSoup(await (await client.get("/dashboard")).text(), "html.parser")
    footer = page.select_one("footer.footer")
    assert footer is not None and footer.get_text(strip=True).endswith(" " + __version__)
