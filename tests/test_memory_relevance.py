"""What reaches the model from a new user's small store: memories added through the API,
natural chats in both languages, default settings and the local model; asserted on the
request body the upstream received. Then the same questions with 1,000 memories around."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from pawwake.memory.embedding_jobs import request_embedding
from pawwake.search.terms import ensure_tokenizer
from pawwake.services import services_of
from tests import retrieval_sizes as sizes
from tests.gateway_support import chat_body
from tests.memory_model_fake import describing_responder
from tests.memory_support import create

# Default settings but for the job runner (run by hand) and extraction: the memory model
# describes each memory added through the API (the deterministic stand-in answers).
LOCAL = {"EMBEDDING_PROVIDER": "local", "JOB_WORKERS": 0, "MEMORY_ENABLED": True,
         "MEMORY_EXTRACT_INTERVAL": 0, "MEMORY_DESCRIBE": True}
MEMORIES = (
    "用户的狗叫豆豆，是一只柯基",
    "The user is allergic to peanuts",
    "用户喜欢听爵士乐",
    "用户每天早上跑步五公里",
    "用户的妹妹住在杭州",
    "The user's birthday is on the 3rd of July",
    "用户在一家游戏公司做后端开发",
    "The user's wife Sarah is a primary school teacher",
)
QUESTIONS = [
    ("我的狗豆豆是什么品种？", "用户的狗叫豆豆，是一只柯基"),  # zh -> zh
    ("豆豆最近好吗", "用户的狗叫豆豆，是一只柯基"),
    ("我妹妹住哪里？", "用户的妹妹住在杭州"),
    ("When is my birthday?", "The user's birthday is on the 3rd of July"),  # en -> en
    ("What does Sarah do for a living?", "The user's wife Sarah is a primary school teacher"),
    ("我能吃花生酱吗？", "The user is allergic to peanuts"),  # zh -> en
    ("我的生日是几月几号？", "The user's birthday is on the 3rd of July"),
    ("我老婆是做什么的？", "The user's wife Sarah is a primary school teacher"),
    ("How far do I run every morning?", "用户每天早上跑步五公里"),  # en -> zh
    ("Where does my younger sister live?", "用户的妹妹住在杭州"),
    # The memory model's words carry these: no keyword is shared and the local model sees
    # little link (without them they miss).
    ("Can I eat a peanut butter sandwich?", "The user is allergic to peanuts"),
    ("what music do I like", "用户喜欢听爵士乐"),
    ("我平时怎么锻炼？", "用户每天早上跑步五公里"),
]
# ("Can I eat a peanut butter sandwich?" left the list when each written question got a
# vector of its own: "What am I allergic to, what can't I eat?" is what it meets; "豆豆最近好吗"
# when a question's frame words stopped counting as keywords; the two birthday questions when
# the model's questions named whose fact a memory is and the most relevant were kept past the
# search's limit. "我能吃花生酱吗？" joined it when the offset went from 7.2 to 7.4, which keeps
# unrelated chats at <= 0.25 memories at every store size: its relevance was 0.46, a Chinese
# question meeting an English memory through its Chinese written question standing 2.5; it
# left when each written question came to stand in its own language: the English one stands
# 4.0 above the English background.)
MISSED_AMONG_A_THOUSAND: list[str] = []
UNRELATED = ("Tell me a joke about computers", "今天天气怎么样", "帮我写一首关于秋天的诗",
             "How do I make a good cup of tea?", "地球到月球有多远")


def sent(upstream: Any) -> str:
    return "\n".join(str(m["content"]) for m in upstream.requests[-1].body["messages"])


async def small_store(gateway: Any, upstream: Any, memories: Sequence[str] = MEMORIES,
                      **settings: Any) -> Any:
    upstream.responder = describing_responder
    client = await gateway(**{**LOCAL, **settings})
    for text in memories:
        assert (await create(client, text))["id"]
    await request_embedding(services_of(client.server.app).memory_writes)
    await services_of(client.server.app).jobs.run_until_idle()
    return client


async def ask(client: Any, text: str) -> None:
    response = await client.post("/v1/chat/completions", json=chat_body(text))
    assert response.status == 200
    await response.read()


# A new user without a memory model (none configured, or before it has described them): the
# evidence is the memory's own words and cosine. These questions share few or no keywords with
# their memory, so its standing above the background decides; with eight memories an unrelated
# chat has eight chances, not a hundred, and the bar asks that much less (``Relevance.many``).
# Their relevance is 0.53-0.78, against 0.00-0.02 for the other memories and the unrelated
# chats' best (0.22-0.47 for these questions when the bar was that of 100 memories). "How
# should I plan my long runs before the marathon?" reaches 0.501: too close to count on.
UNDESCRIBED = (
    "用户的车是一辆白色的比亚迪",
    "The user is allergic to peanuts",
    "The user is training for the Berlin marathon",
    "The user is afraid of flying",
    "The user plays the cello in a community orchestra",
    "The user takes the 7:45 train to work",
    "用户的狗叫豆豆，是一只柯基",
    "用户的妹妹住在杭州",
)
UNDESCRIBED_QUESTIONS = [
    ("我开的是什么车来着", "用户的车是一辆白色的比亚迪"),
    ("Can I eat a peanut butter sandwich?", "The user is allergic to peanuts"),
    ("Any tips for my fear of flights before the trip?", "The user is afraid of flying"),
    ("我在乐团里拉什么乐器？", "The user plays the cello in a community orchestra"),
    ("我几点坐火车上班？", "The user takes the 7:45 train to work"),
]


async def test_a_small_store_without_a_memory_model_still_answers(gateway: Any,
                                                                  upstream: Any) -> None:
    client = await small_store(gateway, upstream, UNDESCRIBED, MEMORY_DESCRIBE=False)
    missed = []
    for question, memory in UNDESCRIBED_QUESTIONS:
        await ask(client, question)
        if memory not in sent(upstream):
            missed.append(question)
    assert missed == []
    for chat in UNRELATED:
        await ask(client, chat)
        assert "<retrieved_memories>" not in sent(upstream), chat


@pytest.mark.parametrize(("question", "memory"), QUESTIONS)
async def test_a_small_store_gives_each_question_its_memory(gateway: Any, upstream: Any,
                                                            question: str, memory: str) -> None:
    client = await small_store(gateway, upstream)
    await ask(client, question)
    assert memory in sent(upstream), question


async def test_unrelated_chats_carry_no_memory(gateway: Any, upstream: Any) -> None:
    client = await small_store(gateway, upstream)
    for chat in UNRELATED:
        await ask(client, chat)
        assert "<retrieved_memories>" not in sent(upstream), chat


async def test_the_same_questions_find_their_memory_among_a_thousand(gateway: Any,
                                                                     upstream: Any) -> None:
    """The eight memories among 992 others: the dev set's topics with their near-miss
    distractors and generated memories about other people in the user's life."""
    client = await gateway(**LOCAL)
    app = client.server.app
    await ensure_tokenizer(services_of(app).settings.PAWWAKE_DATA_DIR)
    data = sizes.corpus(Path(tempfile.gettempdir()), 1000)
    others = [m for m in (*data.natural.memories, *data.others) if m not in MEMORIES]
    store = sizes.Store([*MEMORIES, *others][:1000], [])
    await sizes.fill_store(app, data, store, await services_of(app).config.fresh())
    await sizes.model_described(app, store)
    missed = []
    for question, memory in QUESTIONS:
        await ask(client, question)
        if memory not in sent(upstream):
            missed.append(question)
    brought = 0
    for chat in UNRELATED:
        await ask(client, chat)
        text = sent(upstream)
        if "<retrieved_memories>" in text:
            block = text.split("<retrieved_memories>\n", 1)[1].split("</retrieved_memories>")[0]
            brought += len(block.splitlines())
    # Known misses (equality, so one that starts to pass must leave the list). The store holds
    # dozens of other people's birthdays, as relevant by keywords and cosine as the user's own:
    # the user's passes since its written question is the one asked ("When is my birthday?",
    # theirs "When is my cousin Jake's birthday?") and the most relevant are kept.
    assert missed == MISSED_AMONG_A_THOUSAND, missed
    assert brought <= 1, brought  # over five unrelated chats
