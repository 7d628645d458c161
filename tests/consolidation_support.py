"""Helpers for the consolidation tests: rows at chosen times, scripted model answers, runs."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import date, datetime
from typing import Any

from aiohttp.test_utils import TestClient

from pawwake.db.pool import cursor, fetch_all
from pawwake.services import services_of
from tests.fake_upstream import FakeUpstream, Reply, completion_body

_ITEM = re.compile(r"^\d+\. \[(\d{4}-\d{2}-\d{2})\] \(importance \d+\) (.*)$")


def pool(client: TestClient) -> Any:
    return services_of(client.server.app).database.pool


async def add(client: TestClient, content: str, *, at: str | None = None, layer: int = 1,
              importance: int = 5, event_date: str | None = None, remind_at: str | None = None,
              delivered: bool = False, active: bool = True) -> int:
    """Insert a memory created at ``at`` (ISO time with offset; now when None)."""
    async with cursor(pool(client)) as cur:
        await cur.execute(
            "INSERT INTO memories (content, layer, importance, event_date, remind_at,"
            " reminder_delivered_at, is_active, archived_at, created_at)"
            " VALUES (%s, %s, %s, %s, %s::timestamptz,"
            "  CASE WHEN %s THEN now() END, %s, CASE WHEN %s THEN NULL ELSE now() END,"
            "  COALESCE(%s::timestamptz, now())) RETURNING id",
            (content, layer, importance, date.fromisoformat(event_date) if event_date else None,
             remind_at, delivered, active, active,
             datetime.fromisoformat(at) if at else None))
        return (await cur.fetchone())[0]


def answer(upstream: FakeUpstream, groups: Sequence[dict[str, Any]], **kwargs: Any) -> None:
    """Queue one model answer listing ``groups`` (title/content/importance/merged_ids)."""
    text = json.dumps(list(groups), ensure_ascii=False)
    upstream.queue(Reply(body=completion_body(text, **kwargs)))


def answer_text(upstream: FakeUpstream, text: str, **kwargs: Any) -> None:
    upstream.queue(Reply(body=completion_body(text, **kwargs)))


def group(content: str, ids: list[Any], title: str | None = "事件",
          importance: Any = 6) -> dict[str, Any]:
    return {"title": title, "content": content, "importance": importance, "merged_ids": ids}


def prompt_of(upstream: FakeUpstream, number: int) -> str:
    return upstream.requests[number].body["messages"][0]["content"]


def items_in(prompt: str) -> list[tuple[str, str]]:
    """(local date, text) of each numbered item in a grouping prompt."""
    found = []
    for line in prompt.split("Items:\n", 1)[1].splitlines():
        match = _ITEM.match(line)
        if match:
            found.append((match.group(1), match.group(2)))
    return found


async def run_jobs(client: TestClient) -> int:
    return await services_of(client.server.app).jobs.run_until_idle()


async def start(client: TestClient, body: dict[str, Any]) -> dict[str, Any]:
    response = await client.post("/api/memories/consolidate", json=body)
    assert response.status == 202, await response.text()
    return await response.json()


async def status(client: TestClient) -> dict[str, Any]:
    response = await client.get("/api/memories/consolidate/status")
    assert response.status == 200, await response.text()
    return await response.json()


async def snapshot(client: TestClient) -> list[dict[str, Any]]:
    """Every memory with every column that a merge or revert could touch."""
    async with cursor(pool(client)) as cur:
        return await fetch_all(cur, "SELECT id, content, title, importance, layer,"
                               " is_active, merged_from, event_date, archived_at, updated_at"
                               " FROM memories ORDER BY id")


async def error_of(response: Any) -> dict[str, Any]:
    body = await response.json()
    assert set(body) == {"error"}, body
    return body["error"]


async def make_drafts(client: TestClient, upstream: FakeUpstream, ids: list[int],
                      groups: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Run a selection draft job answered with ``groups``; returns the drafts."""
    await start(client, {"ids": ids})
    answer(upstream, groups)
    await run_jobs(client)
    shown = await status(client)
    assert shown["status"] == "done", shown
    return shown["drafts"]
