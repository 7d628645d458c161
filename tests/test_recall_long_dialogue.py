"""Recall on a long two-person history: the message that answers is among the matched ones.

A small version of the long-dialogue dev set (``bench/recall_quality.py`` runs the whole one):
Maya and Tom (林晓 and 阿杰) chat over a dozen sessions; their names open and close most of
them, the facts asked about sit among small talk, and near misses on the same topics are in
other sessions. Questions name the person and paraphrase the fact; two of them name a month.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from pawwake.services import services_of
from tests.gateway_support import GATEWAY_KEY, chat_body, settle

HEADERS = {"X-Gateway-Key": GATEWAY_KEY}
SETTINGS = {"GATEWAY_SECRET": GATEWAY_KEY, "JOB_WORKERS": 0, "MEMORY_ENABLED": False,
            "CONVERSATION_RECALL_ENABLED": True}
U, A = "user", "assistant"

HELLO_EN = [[(A, "Hey Maya! How's your week going?"), (U, "Not bad at all, a bit busy.")],
            [(A, "Evening Maya. Survived the day?"), (U, "Barely, it was pouring here.")],
            [(A, "Hi Maya! Quick catch-up?"), (U, "Always. Let me grab a tea first.")]]
BYE_EN = [[(U, "Anyway, I should get going. Talk soon Tom!"), (A, "Talk soon Maya, take care!")],
          [(A, "I'm falling asleep, good night Maya."), (U, "Night night!")]]
TALK_EN = [
    [(U, "Big news, we went to the shelter on Saturday and came home with a beagle puppy!"
         " We're calling him Pickle."), (A, "No way! I need pictures immediately.")],
    [(A, "My neighbour's dog barked for three hours straight last night."),
     (U, "Poor you. Dogs get bored on their own.")],
    [(U, "I walked past a pet shop with puppies in the window, so cute.")],
    [(U, "I attempted homemade gnocchi on Sunday and it was actually a success."),
     (A, "You're turning into a proper chef.")],
    [(U, "I tried making a lemon tart, complete disaster, it went in the bin."),
     (A, "Ha, we've all been there.")],
    [(U, "Next weekend I want to try Korean fried chicken.")],
    [(A, "Traffic this morning was a nightmare, took me an hour to get in."),
     (U, "Ugh, the roadworks still?")],
    [(U, "I made ramen last night and it actually turned out great."),
     (A, "Look at you! Send me the recipe?")],
    [(A, "Do you want to come to the night walk in the woods?"),
     (U, "Only if there are no moths. I have a silly phobia of them, ever since I was little.")],
]
HELLO_ZH = [[(A, "林晓，在吗？"), (U, "在呢，怎么啦？")],
            [(A, "早啊林晓，今天忙不忙？"), (U, "还行，刚开完会。")],
            [(A, "林晓！有空聊两句吗？"), (U, "有，我先去买杯奶茶。")]]
BYE_ZH = [[(U, "好啦我先去忙了，回头聊！"), (A, "好的林晓，拜拜~")],
          [(A, "困了，晚安林晓。"), (U, "晚安，早点睡。")]]
TALK_ZH = [
    [(U, "告诉你个大消息，周六去救助站接了一只柯基小狗回家！我们叫它豆豆。"),
     (A, "真的假的！快发照片！")],
    [(A, "隔壁的狗昨晚叫了三个小时。"), (U, "太惨了，狗自己在家会无聊。")],
    [(U, "路过宠物店，橱窗里的小奶狗好可爱。")],
    [(U, "周日挑战了手工饺子，居然成功了。"), (A, "你快成大厨了。")],
    [(U, "我试着做柠檬挞，彻底翻车，直接倒掉了。"), (A, "哈哈谁没翻过车。")],
    [(U, "下周末想试试韩式炸鸡。")],
    [(A, "早上堵车堵了一个小时。"), (U, "还是那段在修路？")],
    [(U, "昨晚自己做了番茄炒蛋，居然还挺好吃。"), (A, "可以啊，教教我？")],
    [(A, "周末一起去山里露营吗？"), (U, "要是打雷我可不去，我从小就特别怕打雷，很傻吧。")],
]
# (question, the message that answers it)
QUESTIONS = [
    ("What breed is the dog Maya adopted?", "beagle puppy"),
    ("What did Maya cook successfully in February 2024?", "homemade gnocchi"),
    ("林晓领养的狗是什么品种？", "柯基小狗"),
    ("2024年2月林晓成功做出了什么菜？", "手工饺子"),
    # every session greets Maya / 林晓 by name: a line holding only the name is no match
    ("What is Maya afraid of?", "phobia"),
    ("林晓害怕什么？", "怕打雷"),
]


# Which exchange each of the twelve sessions holds besides its greetings (None: only those);
# sessions are six days apart from 2024-01-03, so the gnocchi (饺子) one falls in February and
# the failed tart in January.
PLAN = [0, None, 4, 1, 7, 8, 3, 2, 6, None, 5, None]


def sessions(hello: list[Any], talk: list[Any], bye: list[Any], lang: str
             ) -> list[tuple[str, datetime, list[list[tuple[str, str]]]]]:
    start = datetime(2024, 1, 3, 9, tzinfo=UTC)
    out = []
    for number, item in enumerate(PLAN):
        middle = [] if item is None else [talk[item]]
        exchanges = [hello[number % len(hello)], *middle, bye[number % len(bye)]]
        out.append((f"{lang}-{number:02d}", start + timedelta(days=6 * number), exchanges))
    return out


async def store_history(client: Any) -> None:
    for session, day, exchanges in (sessions(HELLO_EN, TALK_EN, BYE_EN, "en")
                                    + sessions(HELLO_ZH, TALK_ZH, BYE_ZH, "zh")):
        for number, exchange in enumerate(exchanges):
            resp = await client.post("/api/conversations/turn", headers=HEADERS, json={
                "turn_id": f"{session}-{number}", "session_id": session, "source": "test",
                "occurred_at": (day + timedelta(minutes=5 * number)).isoformat(),
                "messages": [{"role": role, "content": text} for role, text in exchange]})
            assert resp.status == 201, await resp.text()
    await services_of(client.server.app).jobs.run_until_idle()  # message vectors


@pytest.fixture
async def client(make_client: Any) -> Any:
    client = await make_client(**SETTINGS)
    await store_history(client)
    return client


async def test_the_answering_message_is_matched_in_the_first_fragments(client: Any) -> None:
    missed = []
    for question, evidence in QUESTIONS:
        resp = await client.post("/api/chat/search-fragments", headers=HEADERS,
                                 json={"q": question, "max_sessions": 5})
        assert resp.status == 200, await resp.text()
        found = await resp.json()
        assert found["mode"] == "hybrid"
        matched = [m["content"] for f in found["fragments"] for m in f["messages"]
                   if m["matched"]]
        if not any(evidence in text for text in matched):
            missed.append((question, matched))
    assert missed == []

    # a named month is a window on the messages' times, not a word to look for
    resp = await client.get("/api/chat/search-fragments", headers=HEADERS,
                            params={"q": "What did Maya cook successfully in February 2024?"})
    found = await resp.json()
    first = found["fragments"][0]
    assert any("gnocchi" in m["content"] for m in first["messages"] if m["matched"])
    assert first["parts"]["date"] == 1.0
    assert "2024" not in found["keywords"] and "februari" not in found["keywords"]


async def test_partition_mode_injects_the_answering_message(gateway: Any, upstream: Any
                                                            ) -> None:
    client = await gateway(**SETTINGS, CACHE_PARTITION_ENABLED=True,
                           MAX_CONVERSATIONS_INJECT=3, TIMEZONE_HOURS=0)
    await store_history(client)
    for question, evidence in (QUESTIONS[0], QUESTIONS[2]):
        await services_of(client.server.app).config.update(
            {"PARTITION_SESSION_ID": f"now-{evidence}"})
        resp = await client.post("/v1/chat/completions", json=chat_body(question),
                                 headers=HEADERS)
        assert resp.status == 200
        await resp.read()
        await settle(client)
        content = upstream.requests[-1].body["messages"][-1]["content"]
        turn = content if isinstance(content, str) else str(content)
        block = turn.split("</retrieved_conversations>")[0]
        assert block.startswith("<retrieved_conversations>"), turn
        assert evidence in block, turn


async def test_a_question_naming_one_of_the_two_finds_what_that_person_said(
        make_client: Any) -> None:
    """Tom greets Maya in every session and she answers by name, so "Maya" names the user and
    "Tom" the assistant; "What is Maya's phobia?"
    is answered by her line, not by Tom's newer one on the same word (keywords only here:
    both lines share the keyword, and recency alone put Tom's first)."""
    client = await make_client(**SETTINGS)
    start = datetime(2024, 3, 1, 9, tzinfo=UTC)
    for number in range(12):
        exchange = [(A, "Hey Maya! How's your week going?"), (U, "Busy but fine, Tom.")]
        if number == 3:
            exchange.append((U, "I have a silly phobia of moths, ever since I was little."))
        if number == 8:
            exchange.append((A, "Confession: I have a phobia of spiders."))
        resp = await client.post("/api/conversations/turn", headers=HEADERS, json={
            "turn_id": f"t{number}", "session_id": f"s{number:02d}", "source": "test",
            "occurred_at": (start + timedelta(days=3 * number)).isoformat(),
            "messages": [{"role": role, "content": text} for role, text in exchange]})
        assert resp.status == 201, await resp.text()
    resp = await client.post("/api/chat/search-fragments", headers=HEADERS, json={
        "q": "What is Maya's phobia?", "max_sessions": 2, "mode": "keyword"})
    found = await resp.json()
    first = found["fragments"][0]
    assert first["session_id"] == "s03", found
    assert first["parts"]["speaker"] == 1.0
    # the other way round: a question naming Tom (the assistant) prefers his line
    resp = await client.post("/api/chat/search-fragments", headers=HEADERS, json={
        "q": "What is Tom's phobia?", "max_sessions": 2, "mode": "keyword"})
    assert (await resp.json())["fragments"][0]["session_id"] == "s08"
    # naming both tells no side: recency decides between the two lines again
    resp = await client.post("/api/chat/search-fragments", headers=HEADERS, json={
        "q": "Which phobia do Maya and Tom share?", "max_sessions": 2, "mode": "keyword"})
    first = (await resp.json())["fragments"][0]
    assert first["session_id"] == "s08" and "speaker" not in first["parts"]
