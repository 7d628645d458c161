"""Text PostgreSQL cannot hold (NUL, lone surrogates) on every route that takes text: never a
500, and what is stored is the cleaned text (NUL removed, a lone surrogate as U+FFFD)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from pawwake.db.pool import cursor, fetch_all
from pawwake.services import services_of
from tests.fake_upstream import Reply, chat_chunk, completion_body, sse
from tests.gateway_support import chat_body, settle

# (what is sent inside a word, what must be stored in its place)
BAD = [pytest.param("\x00", "", id="nul"), pytest.param("\ud800", "\ufffd", id="surrogate")]
SETTINGS = {"JOB_WORKERS": 0, "CONVERSATION_RECALL_ENABLED": True}


def word(bad: str) -> str:
    return f"mark{bad}end"


def raw_json(value: Any) -> bytes:
    """JSON as a client writes it: the lone surrogate as its ``\\ud800`` escape."""
    return json.dumps(value).encode("ascii")


@dataclass
class Ctx:
    client: TestClient
    memories: list[int]

    async def send(self, method: str, path: str, body: Any) -> Any:
        return await self.client.request(method, path, data=raw_json(body),
                                         headers={"Content-Type": "application/json"})

    async def values(self, sql: str) -> list[str]:
        pool = services_of(self.client.server.app).database.pool
        async with cursor(pool) as cur:
            return [str(next(iter(row.values()))) for row in await fetch_all(cur, sql)]


async def setup(client: TestClient) -> Ctx:
    ids = []
    for text in ("猫喜欢吃鱼", "The cat sleeps on the sofa"):
        resp = await client.post("/api/memories", json={"content": text})
        assert resp.status == 201, await resp.text()
        ids.append((await resp.json())["id"])
    seed = [{"session_id": s, "role": "user", "content": f"hello from {s}",
             "created_at": "2026-01-01T10:00:00Z"} for s in ("s1", "s2")]
    resp = await client.post("/api/conversations/import", json=seed)
    assert resp.status == 201, await resp.text()
    return Ctx(client, ids)


Send = Callable[[Ctx, str], Awaitable[Any]]
MEMORY_TEXT = "SELECT content || coalesce(title, '') FROM memories"
MESSAGES = "SELECT content || metadata::text FROM conversations"


async def message_id(ctx: Ctx) -> int:
    return int((await ctx.values("SELECT min(id) FROM conversations"))[0])


ROUTES: list[tuple[str, Send, str | None]] = [
    ("memory-create", lambda c, t: c.send("POST", "/api/memories",
                                          {"content": t, "title": t}), MEMORY_TEXT),
    ("memory-edit", lambda c, t: c.send("PUT", f"/api/memories/{c.memories[0]}",
                                        {"content": t, "title": t}), MEMORY_TEXT),
    ("memory-batch-title", lambda c, t: c.send(
        "POST", "/api/memories/batch-update",
        {"ids": c.memories, "fields": {"title": t}}), MEMORY_TEXT),
    ("memory-search-post", lambda c, t: c.send("POST", "/api/memories/search", {"q": t}), None),
    ("memory-check-duplicate", lambda c, t: c.send("POST", "/api/memories/check-duplicate",
                                                   {"content": t}), None),
    ("memory-import-text", lambda c, t: c.send("POST", "/api/memories/import/text",
                                               {"text": f"{t}\nsecond line",
                                                "skip_scoring": True}), MEMORY_TEXT),
    ("memory-import-backup", lambda c, t: c.send(
        "POST", "/api/memories/import",
        {"schema_version": 1,
         "memories": [{"backup_id": 1, "content": t, "title": t, "importance": 5,
                       "layer": 1}]}), MEMORY_TEXT),
    ("memory-merge", lambda c, t: c.send("POST", "/api/memories/merge",
                                         {"source_ids": c.memories, "content": t, "title": t,
                                          "layer": 2}), MEMORY_TEXT),
    ("turn-ingest", lambda c, t: c.send("POST", "/api/conversations/turn", {
        "turn_id": t, "session_id": t, "source": "claude-code", "model": t,
        "metadata": {t: t},
        "messages": [{"role": "user", "content": t},
                     {"role": "assistant", "content": [{"type": "text", "text": t}]}]}),
     MESSAGES),
    ("fragment-search-post", lambda c, t: c.send("POST", "/api/chat/search-fragments",
                                                 {"q": t}), None),
    ("conversation-edit", lambda c, t: _edit_message(c, t), MESSAGES),
    ("conversation-merge", lambda c, t: c.send("POST", "/api/admin/merge-sessions",
                                               {"source_ids": ["s1", t], "target_id": "s2"}),
     None),
    ("conversation-import", lambda c, t: c.send("POST", "/api/conversations/import", [
        {"session_id": t, "role": "user", "content": t, "model": t, "metadata": {t: [t]},
         "created_at": "2026-01-02T10:00:00Z"}]), MESSAGES),
    ("partition-create", lambda c, t: c.send("POST", "/api/partition/thread",
                                             {"thread_id": t}), None),
    ("partition-switch", lambda c, t: c.send("POST", "/api/partition/switch",
                                             {"thread_id": t}), None),
    ("partition-rename", lambda c, t: c.send("PUT", "/api/partition/thread/rename",
                                             {"old_id": "s1", "new_id": t}), None),
    ("partition-summary", lambda c, t: c.send("PUT", "/api/partition/summary",
                                              {"thread_id": "s1", "summary": t}),
     "SELECT summary_parts::text FROM partition_state"),
    ("settings", lambda c, t: c.send("PUT", "/api/settings", {"SYSTEM_PROMPT": t}),
     "SELECT value::text FROM gateway_config"),
]

QUERY_ROUTES = ["/api/memories/search?q={}", "/api/chat/search-fragments?q={}",
                "/api/conversations?q={}", "/api/conversations/{}/messages",
                "/api/partition/summary?thread_id={}"]


async def _edit_message(ctx: Ctx, text: str) -> Any:
    return await ctx.send("PUT", f"/api/conversations/messages/{await message_id(ctx)}",
                          {"content": text})


@pytest.mark.parametrize(("bad", "clean"), BAD)
@pytest.mark.parametrize(("name", "send", "stored"), [pytest.param(*r, id=r[0]) for r in ROUTES])
async def test_api_routes_clean_unstorable_text(make_client: Any, name: str, send: Send,
                                                stored: str | None, bad: str, clean: str
                                                ) -> None:
    ctx = await setup(await make_client(**SETTINGS))
    response = await send(ctx, word(bad))
    text = await response.text()
    assert response.status < 500, text
    assert "\x00" not in text
    if stored is not None:
        assert response.status < 300, text
        values = await ctx.values(stored)
        assert any(word(clean) in value for value in values), values


@pytest.mark.parametrize("quoted", ["%00", "%ED%A0%80", "%F0"], ids=["nul", "cesu", "cut"])
@pytest.mark.parametrize("template", QUERY_ROUTES)
async def test_query_strings_with_unstorable_text(make_client: Any, template: str,
                                                  quoted: str) -> None:
    from yarl import URL

    ctx = await setup(await make_client(**SETTINGS))
    url = URL(template.format(f"mark{quoted}end"), encoded=True)
    response = await ctx.client.get(url)
    assert response.status < 500, await response.text()


@pytest.mark.parametrize(("bad", "clean"), BAD)
@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
async def test_chat_turn_with_unstorable_text_is_stored_clean(gateway: Any, upstream: Any,
                                                              bad: str, clean: str,
                                                              stream: bool) -> None:
    """The measured loss: 200 to the client, the turn never stored."""
    client = await gateway(JOB_WORKERS=0)
    reply = f"reply {word(bad)}"
    upstream.queue(Reply(body=completion_body(reply), chunks=[
        sse(json.dumps(chat_chunk({"role": "assistant", "content": reply}))),
        sse(json.dumps(chat_chunk({}, finish_reason="stop"))), sse("[DONE]")]))
    body = chat_body(f"hello {word(bad)}", stream=stream)
    body["messages"][0]["name"] = word(bad)
    response = await client.post("/v1/chat/completions", data=raw_json(body),
                                 headers={"Content-Type": "application/json"})
    assert response.status == 200, await response.text()
    await response.read()
    await settle(client)
    async with cursor(services_of(client.server.app).database.pool) as cur:
        rows = await fetch_all(cur,
                               "SELECT role, content, metadata FROM conversations ORDER BY id")
    assert [(r["role"], r["content"]) for r in rows] == [
        ("user", f"hello {word(clean)}"), ("assistant", f"reply {word(clean)}")]
    assert rows[0]["metadata"]["name"] == word(clean)
    sent = upstream.requests[-1].body["messages"][-1]["content"]
    assert word(clean) in sent
