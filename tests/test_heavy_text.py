"""Long texts are cut off the event loop and from a bounded part (a pasted book stalled every
chat: jieba ran on the loop over the whole text)."""

from __future__ import annotations

import asyncio
import json
import random
from typing import Any

import jieba
import pytest

from pawwake.recall import index as conversation_index
from pawwake.text import offload, tokens
from tests.gateway_support import GATEWAY_KEY, chat_body, settle

WORDS = "今天我们去公园散步然后吃了一顿很好吃的火锅晚上看电影回家睡觉明天还要上班"
BOUND = max(tokens.INDEX_HEAD_CHARS + tokens.INDEX_TAIL_CHARS,
            tokens.QUERY_HEAD_CHARS + tokens.QUERY_TAIL_CHARS) + 1


def chinese(length: int, seed: int) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(WORDS) for _ in range(length))


@pytest.fixture
def cuts(monkeypatch: pytest.MonkeyPatch) -> list[tuple[bool, int]]:
    """Every jieba cut as (ran on an event loop thread, characters cut)."""
    seen: list[tuple[bool, int]] = []

    def spy(real: Any) -> Any:
        def cut(text: str, *args: Any, **kwargs: Any) -> Any:
            try:
                asyncio.get_running_loop()
                on_loop = True
            except RuntimeError:
                on_loop = False
            seen.append((on_loop, len(text)))
            return real(text, *args, **kwargs)
        return cut

    monkeypatch.setattr(jieba, "lcut", spy(jieba.lcut))
    monkeypatch.setattr(jieba, "lcut_for_search", spy(jieba.lcut_for_search))
    return seen


def test_long_text_is_indexed_from_its_head_and_tail() -> None:
    head, middle, tail = "牙医预约。", chinese(1_000_000, 1), "。周末喝咖啡"
    terms = tokens.index_terms(head + middle + tail)
    assert "牙医" in terms and "咖啡" in terms
    assert tokens.bounded("短短文本", 1, 2) == "短\n文本"
    assert tokens.bounded("短文本", 1, 2) == "短文本"
    keywords = tokens.query_keywords(chinese(500_000, 2) + "。我的牙医叫什么名字", top_k=5000)
    assert "牙医" in keywords


async def test_background_texts_are_cut_in_bounded_groups(cuts: list[tuple[bool, int]]
                                                          ) -> None:
    texts = [chinese(200_000, 3), "我喜欢猫", "", chinese(30, 4)]
    terms = await offload.index_terms(texts)
    assert len(terms) == 4 and terms[2] == [] and "喜欢" in terms[1]
    assert cuts and all(not on_loop for on_loop, _ in cuts)
    assert max(length for _, length in cuts) <= BOUND
    assert offload._groups(["a" * 7000, "b" * 500, "c" * 600, "d" * 10]) == [
        ["a" * 7000, "b" * 500], ["c" * 600, "d" * 10]]
    assert offload._groups(["", "x"]) == [["", "x"]]


async def test_chat_memory_and_search_never_cut_on_the_event_loop(
        gateway: Any, cuts: list[tuple[bool, int]]) -> None:
    client = await gateway(MEMORY_ENABLED=True, MEMORY_VECTOR_ENABLED=False,
                           MEMORY_EXTRACT_INTERVAL=0, JOB_WORKERS=0,
                           GATEWAY_SECRET=GATEWAY_KEY)
    headers = {"X-Gateway-Key": GATEWAY_KEY}
    memory = chinese(12_000, 5) + "我的猫叫小橘"
    resp = await client.post("/api/memories", json={"content": memory}, headers=headers)
    assert resp.status == 201, await resp.text()
    message = chinese(100_000, 6) + "我的猫叫什么？"
    resp = await client.post("/v1/chat/completions", headers=headers,
                             json=chat_body(message, stream=True))
    assert resp.status == 200
    await resp.read()
    resp = await client.get("/api/memories/search", params={"q": "小橘是谁的猫"},
                            headers=headers)
    assert resp.status == 200
    await settle(client)
    assert len(cuts) >= 3
    assert [c for c in cuts if c[0]] == []
    assert max(length for _, length in cuts) <= BOUND


def test_texts_of_one_turn_share_a_budget() -> None:
    texts = [chinese(20_000, 10 + n) for n in range(30)] + ["短句"]
    cut = offload.shared_bound(texts, 100_000)
    assert sum(map(len, cut)) <= 100_000 + len(texts)
    assert cut[-1] == "短句" and cut[0].startswith(texts[0][:100])
    assert offload.shared_bound(["短句", "长" * 5000], 100_000) == ["短句", "长" * 5000]
    many = offload.shared_bound([chinese(5000, n) for n in range(1000)], 100_000)
    assert {len(text) for text in many} == {offload.MIN_SHARE + 1}


async def test_a_large_sidecar_turn_is_cut_within_its_budget(
        gateway: Any, cuts: list[tuple[bool, int]]) -> None:
    client = await gateway(CONVERSATION_RECALL_ENABLED=True, JOB_WORKERS=0,
                           GATEWAY_SECRET=GATEWAY_KEY)
    messages = [{"role": "user" if n % 2 == 0 else "assistant",
                 "content": chinese(10_000, 20 + n)} for n in range(30)]
    body = json.dumps({"turn_id": "t-big", "session_id": "s-big", "source": "test",
                       "messages": messages, "extract_memories": False},
                      ensure_ascii=False).encode()
    resp = await client.post("/api/conversations/turn", data=body,
                             headers={"X-Gateway-Key": GATEWAY_KEY,
                                      "Content-Type": "application/json"})
    assert resp.status == 201, await resp.text()
    precise = [length for on_loop, length in cuts if not on_loop]
    assert len(precise) == len(cuts) >= 2 * len(messages)
    budget = conversation_index.TURN_INDEX_CHARS
    assert sum(precise) <= 2 * (budget + 2 * len(messages))  # lcut and lcut_for_search
