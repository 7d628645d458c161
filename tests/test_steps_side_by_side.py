"""The memories and the recalled fragments of one chat run side by side (partition mode): what
one waits for (its query's vector, its statements) no longer comes before the other starts, and
the request upstream is the same as when they ran one after the other."""

from __future__ import annotations

import asyncio
from typing import Any

from pawwake.services import services_of
from tests.conditions import until
from tests.embedding_server import FakeEmbeddings, serve_embeddings
from tests.gateway_support import GATEWAY_KEY, chat_body, settle
from tests.memory_fixtures import insert_memory
from tests.test_recall_injection import current_turn, store_turn

HEADERS = {"X-Gateway-Key": GATEWAY_KEY}
# A date the question names leaves the text recall embeds: the two steps embed two texts.
QUESTION = "我们1月5日聊的京都清水寺行程是什么"
RECALL_TEXT = "我们 聊的京都清水寺行程是什么"


def queries(fake: FakeEmbeddings) -> list[str]:
    return [r["input"][0] for r in fake.requests if r["input"] in ([QUESTION], [RECALL_TEXT])]


async def test_recall_embeds_while_the_memory_search_still_waits_for_its_vector(
        gateway: Any, upstream: Any, aiohttp_server: Any) -> None:
    fake = await serve_embeddings(aiohttp_server)
    client = await gateway(
        GATEWAY_SECRET=GATEWAY_KEY, JOB_WORKERS=0, MEMORY_ENABLED=True,
        CONVERSATION_RECALL_ENABLED=True, CACHE_PARTITION_ENABLED=True, TIMEZONE_HOURS=8,
        EMBEDDING_PROVIDER="api", EMBEDDING_API_KEY="sk-embed-0123456789",
        EMBEDDING_BASE_URL=fake.base_url, EMBEDDING_MODEL="fake-a", EMBEDDING_DIM=16,
        QUERY_EMBEDDING_TIMEOUT=60, MEMORY_INJECT_MIN_RELEVANCE=0)
    await insert_memory(services_of(client.server.app).database.pool,
                        "用户计划去京都清水寺，想早上七点出发")
    await store_turn(client, "trip", "t1", "下个月去京都旅行，清水寺那天怎么安排",
                     "早上七点到清水寺，中午去二年坂吃汤豆腐。")
    warm = await client.post("/v1/chat/completions", json=chat_body("今天天气怎么样"),
                             headers=HEADERS)  # the probe and the reference set, embedded once
    assert warm.status == 200
    await warm.read()
    await settle(client)

    fake.hold = asyncio.Event()  # no embedding is answered until both have been asked
    chat = asyncio.ensure_future(client.post("/v1/chat/completions", json=chat_body(QUESTION),
                                             headers=HEADERS))
    try:
        # One after the other, recall would only ask once the memory search had its vector.
        await until(lambda: sorted(queries(fake)) == sorted([QUESTION, RECALL_TEXT]))
    finally:
        fake.hold.set()
    response = await chat
    assert response.status == 200
    await response.read()
    await settle(client)

    turn = current_turn(upstream)  # both blocks, in the steps' declared order
    assert turn.index("<retrieved_memories>") < turn.index("<retrieved_conversations>")
    assert "京都清水寺" in turn.split("<retrieved_conversations>")[0]
    assert "二年坂" in turn.split("<retrieved_conversations>")[1]
    assert turn.endswith(QUESTION)
