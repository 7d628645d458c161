"""The dashboard answers every error in one place, its errors middleware: pages and the
middlewares inside it raise, and the answer is worded there in the reader's language."""

from __future__ import annotations

import ast
import asyncio
from typing import Any

import pytest
from bs4 import BeautifulSoup

from pawwake import request_statements
from pawwake.dashboard.i18n import STRINGS
from tests.dashboard_support import dashboard_client, login
from tests.test_layers import ROOT
from tests.test_statement_bounds import locker as own_connection


def render_error_callers() -> list[str]:
    """``module:function`` of every call to ``render_error`` in the dashboard."""
    found = []
    for path in sorted((ROOT / "dashboard").rglob("*.py")):
        for function in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(function):
                if isinstance(node, ast.Call):
                    name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                    if name == "render_error":
                        found.append(f"{path.relative_to(ROOT)}:{function.name}")
    return found


locker = own_connection  # a connection of the test's own, for the lock


def test_only_the_errors_middleware_renders_an_error() -> None:
    assert render_error_callers() == ["dashboard/middlewares.py:errors_middleware"]


async def test_a_slow_feature_page_says_slow_not_that_the_database_is_off(
        make_client: Any, locker: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A statement of the memories page stopped at its bound is "too slow", in the page's
    language; the feature's own "no database" words are for a database turned off."""
    monkeypatch.setattr(request_statements, "REQUEST_STATEMENT_SECONDS", 0.5)
    client = await dashboard_client(make_client, JOB_WORKERS=0)
    assert (await login(client)).status == 303
    with locker.cursor() as cur:
        cur.execute("LOCK TABLE memories IN ACCESS EXCLUSIVE MODE")
    async with asyncio.timeout(30):
        response = await client.get("/dashboard/memories")
    assert response.status == 503
    text = BeautifulSoup(await response.text(), "html.parser").get_text()
    assert STRINGS["zh"]["error.database_slow"] in text
    assert STRINGS["zh"]["memories.no_database"] not in text
