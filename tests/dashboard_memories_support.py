"""Helpers for the memory pages' tests: a signed-in client, reading rows and forms from HTML."""

from __future__ import annotations

from typing import Any

from aiohttp.test_utils import TestClient
from bs4 import BeautifulSoup

from tests.dashboard_support import dashboard_client, htmx, login, same_origin, soup
from tests.embedding_server import FakeEmbeddings

FIRST_ID = 987_650  # row ids far from any row number, so a leaked id is easy to spot


async def signed_in(make_client: Any, **overrides: Any) -> TestClient:
    """A dashboard client after login; background jobs run only when a test asks."""
    client = await dashboard_client(make_client, **{"JOB_WORKERS": 0, **overrides})
    assert (await login(client)).status == 303
    return client


def embedding_settings(fake: FakeEmbeddings, model: str = "fake-a") -> dict[str, Any]:
    return {"EMBEDDING_PROVIDER": "api", "EMBEDDING_API_KEY": "sk-embed-test-0123456789",
            "EMBEDDING_BASE_URL": fake.base_url, "EMBEDDING_MODEL": model,
            "EMBEDDING_DIM": 16}


def rows(page: BeautifulSoup) -> list[dict[str, Any]]:
    """The list's rows as a user sees them, plus the id each checkbox carries."""
    found = []
    for item in page.select(".memory-row"):
        title = item.select_one("[data-title]")
        layer = item.select_one("[data-layer]")
        importance = item.select_one("[data-importance]")
        content = item.select_one("[data-content]")
        found.append({
            "n": int(item.select_one("[data-row-number]").get_text(strip=True)),
            "content": content.get_text(strip=True) if content else None,
            "title": title.get_text(strip=True) if title else None,
            "layer": int(layer["data-layer"]) if layer else None,
            "importance": int(importance["data-importance"]) if importance else None,
            "id": int(item.select_one("input[name=ids]")["value"]),
            "message": item.select_one("[data-row-result]"),
        })
    return found


def tab_counts(page: BeautifulSoup) -> dict[str, int]:
    counts = {}
    for tab in page.select("[data-status-tab], [data-layer-tab]"):
        key = tab.get("data-status-tab") or f"layer:{tab['data-layer-tab']}"
        counts[key] = int(tab.select_one("[data-count]").get_text(strip=True))
    return counts


def notice(page: BeautifulSoup) -> tuple[str, str] | None:
    """(kind, text) of the message above the list."""
    element = page.select_one("#memories-main > [data-result]")
    return (element["data-result"], element.get_text(" ", strip=True)) if element else None


def form_fields(form: Any) -> list[tuple[str, str]]:
    return [(field["name"], field.get("value", "")) for field in form.select("input[name]")
            if field.get("type") != "checkbox"] + [
        (area["name"], area.get_text()) for area in form.select("textarea[name]")]


async def first_ids(client: TestClient) -> None:
    """Start row ids at FIRST_ID so that ids and row numbers cannot be confused."""
    from tests.memory_support import sql

    await sql(client, f"ALTER SEQUENCE memories_id_seq RESTART WITH {FIRST_ID}")


async def page_of(client: TestClient, path: str = "/dashboard/memories", **params: str
                  ) -> BeautifulSoup:
    response = await client.get(path, params=params)
    assert response.status == 200, await response.text()
    return soup(await response.text())


async def post(client: TestClient, path: str, data: Any, *, hx: bool = True) -> Any:
    headers = htmx(client) if hx else same_origin(client)
    return await client.post(path, data=data, headers=headers, allow_redirects=False)
