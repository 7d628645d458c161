"""Settings that work but no other test drives end to end: MAX_MEMORIES_INJECT (the cap, and
0 = no automatic injection) through a chat, and CACHE_SUMMARY_MAX_TOKENS reaching the summary
request of a partition rotation."""

from __future__ import annotations

import re
from typing import Any

from pawwake.db.pool import transaction
from pawwake.services import services_of
from pawwake.text import tokens
from tests.gateway_support import chat_body, settle
from tests.partition_support import PARTITION, say

MEMORY_ON = {"MEMORY_ENABLED": True, "MEMORY_VECTOR_ENABLED": False, "JOB_WORKERS": 0,
             "MEMORY_EXTRACT_INTERVAL": 0}

CAT_FACTS = ["用户的猫小橘喜欢吃鸡肉", "用户的猫小橘怕打雷", "用户的猫小橘三岁了",
             "用户的猫小橘是橘色的", "用户的猫小橘晚上爱跑酷"]


async def add_memory(client: Any, content: str) -> None:
    tokens.load()
    async with transaction(services_of(client.server.app).database.pool) as cur:
        await cur.execute("INSERT INTO memories (content, importance, search_terms)"
                          " VALUES (%s, 8, %s)", (content, tokens.index_terms(content)))


def injected(upstream: Any) -> list[str]:
    """The memory lines of the last upstream request's <retrieved_memories> block."""
    system = upstream.requests[-1].body["messages"][0]
    if system["role"] != "system" or "<retrieved_memories>" not in system["content"]:
        return []
    block = re.search(r"<retrieved_memories>\n(.*?)\n</retrieved_memories>",
                      system["content"], re.S)
    assert block is not None
    return [line for line in block.group(1).splitlines() if "小橘" in line]


async def test_max_memories_inject_caps_the_block_and_zero_turns_it_off(
        gateway: Any, upstream: Any) -> None:
    client = await gateway(persona="你是小爪。", MAX_MEMORIES_INJECT=2, **MEMORY_ON)
    for fact in CAT_FACTS:
        await add_memory(client, fact)
    config = services_of(client.server.app).config

    async def chat() -> list[str]:
        upstream.reply_text("好的")
        response = await client.post("/v1/chat/completions", json=chat_body("小橘今天怎么样"))
        assert response.status == 200
        await response.read()
        await settle(client)
        return injected(upstream)

    assert len(await chat()) == 2
    await config.update({"MAX_MEMORIES_INJECT": 4})  # hot: the very next chat
    assert len(await chat()) == 4
    await config.update({"MAX_MEMORIES_INJECT": 0})
    assert await chat() == []
    system = upstream.requests[-1].body["messages"][0]
    assert system["content"] == "你是小爪。"  # no empty block, no guidance


async def test_cache_summary_max_tokens_reaches_the_summary_request(gateway: Any,
                                                                    upstream: Any) -> None:
    """X = 2: the first rotation (and its summary request) comes with round 5."""
    client = await gateway(persona="你是小爪。", CACHE_SUMMARY_MODEL="test/summary",
                           CACHE_SUMMARY_MAX_TOKENS=1234, **PARTITION)
    for n in range(1, 6):
        await say(client, upstream, f"问{n}", f"答{n}", summary="摘要" if n == 5 else None)
    summaries = [r.body for r in upstream.requests
                 if isinstance(r.body, dict) and r.body.get("model") == "test/summary"]
    assert len(summaries) == 1
    assert summaries[0]["max_tokens"] == 1234
    chats = [r.body for r in upstream.requests
             if isinstance(r.body, dict) and r.body.get("model") != "test/summary"]
    assert all(body.get("max_tokens") != 1234 for body in chats)
    assert services_of(client.server.app).config.current()["CACHE_SUMMARY_MAX_TOKENS"] == 1234
