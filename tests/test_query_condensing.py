"""Long search queries are condensed before they are embedded (the embedding is on the path to
the reply's first token, and its time grows with the text)."""

from __future__ import annotations

from typing import Any

import pytest

from pawwake.services import services_of
from pawwake.text import tokens
from pawwake.text.query import EMBED_MAX_CHARS, TAIL_CHARS, embedding_text, users_words
from tests.embedding_server import FakeEmbeddings, serve_embeddings
from tests.memory_fixtures import insert_memory

KEY = "sk-condense-0123456789"
PASTE = ("下面是我这周的流水账。" + "周一开会，周二写报告，周三又开会，周四改报告。" * 60
         + "对了，我下周二要去看牙医，洗牙加补牙，你记得提醒我带医保卡。")


@pytest.fixture
async def fake(aiohttp_server: Any) -> FakeEmbeddings:
    return await serve_embeddings(aiohttp_server)


def test_short_text_is_embedded_as_sent() -> None:
    text = "  过年回家吗？  "
    assert embedding_text(text, ["过年", "回家"]) == text


def test_long_text_becomes_keywords_plus_its_tail() -> None:
    tokens.load()
    keywords = tokens.query_keywords(PASTE)
    condensed = embedding_text(PASTE, keywords)
    assert len(condensed) <= EMBED_MAX_CHARS
    assert condensed.endswith(" ".join(PASTE[-TAIL_CHARS:].split()))
    outside_tail = [k for k in keywords if k not in PASTE[-TAIL_CHARS:]]
    assert outside_tail, "the fixture should have keywords outside the tail"
    assert outside_tail[0] in condensed  # the most important keyword that the tail lacks
    assert embedding_text(PASTE, []) == " ".join(PASTE[-TAIL_CHARS:].split())


async def test_a_pasted_message_searches_with_a_condensed_query(make_client: Any,
                                                                fake: FakeEmbeddings) -> None:
    client = await make_client(JOB_WORKERS=0, GATEWAY_SECRET=KEY,
                               EMBEDDING_API_KEY="sk-embed-0123456789",
                               EMBEDDING_BASE_URL=fake.base_url, EMBEDDING_MODEL="fake-a",
                               EMBEDDING_DIM=16)
    app = client.server.app
    pool = services_of(app).database.pool
    wanted = await insert_memory(pool, "用户下周二要去看牙医，洗牙和补牙")
    await insert_memory(pool, "用户喜欢周末去爬山")
    resp = await client.post("/api/admin/backfill-memory-embeddings",
                             headers={"X-Gateway-Key": KEY})
    assert resp.status == 202
    await services_of(app).jobs.run_until_idle()
    stored = set(fake.inputs)

    resp = await client.post("/api/memories/search", json={"q": PASTE, "limit": 5},
                             headers={"X-Gateway-Key": KEY})
    assert resp.status == 200, await resp.text()
    found = await resp.json()
    assert found["mode"] == "hybrid"
    assert wanted in [m["id"] for m in found["results"]]
    queries = [text for text in fake.inputs if text not in stored and text != "ping"]
    assert queries, "the query was not embedded"
    assert all(len(text) <= EMBED_MAX_CHARS + len("query: ") for text in queries)
    assert PASTE not in queries


def test_a_clients_reminder_blocks_are_not_searched_for() -> None:
    sent = ("<system-reminder>\n# Environment\nYou have been invoked in the following"
            " environment: Shell: bash\n</system-reminder>\n小橘是谁？"
            "<system-reminder>unclosed tool list")
    assert users_words(sent) == "小橘是谁？"
    assert users_words("小橘是谁？") == "小橘是谁？"
