"""Conversation recall: ranking, exclusions, stable fragment ids, seen TTL, the inject block."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from pawwake.app import create_app
from pawwake.db.pool import cursor, execute
from pawwake.db.statement_bounds import BoundedStatements
from pawwake.recall.inject import (
    format_retrieved_conversations,
    fragments_to_exclude,
    mark_fragments_seen,
)
from pawwake.recall.rank import (
    MessageHit,
    SemanticScale,
    Weights,
    fragment_id,
    rank_sessions,
)
from pawwake.services import services_of

KEY = "recall-gateway-key-0123456789abcd"
HEADERS = {"X-Gateway-Key": KEY}
SETTINGS = {"GATEWAY_SECRET": KEY, "JOB_WORKERS": 0, "CONVERSATION_RECALL_ENABLED": True,
            "MEMORY_ENABLED": False}
SESSIONS = {
    "trip": [("下个月去京都旅行，清水寺那天怎么安排", "早上七点到清水寺，中午去二年坂吃汤豆腐。"),
             ("京都的红叶什么时候最好看", "十一月中下旬，东福寺最有名。")],
    "cat": [("我的猫最近不爱吃猫粮", "可以换个口味，或者带它去看兽医。")],
    "code": [("Python 里 asyncio gather 怎么用", "gather 可以并发等待多个协程。")],
}


async def store(client: Any, session: str, pairs: list[tuple[str, str]], day: int) -> None:
    for number, (user, reply) in enumerate(pairs):
        when = datetime(2026, 1, day, 10, number, tzinfo=UTC).isoformat()
        resp = await client.post("/api/conversations/turn", headers=HEADERS, json={
            "turn_id": f"{session}-{number}", "session_id": session, "source": "test",
            "occurred_at": when, "messages": [{"role": "user", "content": user},
                                              {"role": "assistant", "content": reply}]})
        assert resp.status == 201


async def recall_client(make_client: Any) -> Any:
    """A gateway with recall on and ``SESSIONS`` stored, one day apart."""
    client = await make_client(**SETTINGS)
    for day, (session, pairs) in enumerate(SESSIONS.items(), start=1):
        await store(client, session, pairs, day)
    return client


@pytest.fixture
async def client(make_client: Any) -> Any:
    return await recall_client(make_client)


async def search(client: Any, **body: Any) -> dict[str, Any]:
    resp = await client.post("/api/chat/search-fragments", json=body, headers=HEADERS)
    assert resp.status == 200, await resp.text()
    return await resp.json()


async def test_keyword_search_finds_the_session_with_context(client: Any) -> None:
    found = await search(client, q="京都清水寺", mode="keyword", context=1)
    assert found["mode"] == "keyword"
    assert [f["session_id"] for f in found["fragments"]] == ["trip"]
    fragment = found["fragments"][0]
    assert fragment["fragment_id"].startswith("v1:") and len(fragment["fragment_id"]) == 35
    texts = [(m["role"], m["matched"]) for m in fragment["messages"]]
    assert ("user", True) in texts and ("assistant", False) in texts


async def test_get_and_post_agree_and_ids_are_stable(client: Any, make_settings: Any,
                                                     aiohttp_client: Any) -> None:
    first = await search(client, q="京都红叶", mode="keyword")
    resp = await client.get("/api/chat/search-fragments",
                            params={"q": "京都红叶", "mode": "keyword"}, headers=HEADERS)
    second = await resp.json()
    assert first["fragment_ids"] == second["fragment_ids"] != []
    restarted = await aiohttp_client(create_app(make_settings(**SETTINGS)))
    resp = await restarted.post("/api/chat/search-fragments", headers=HEADERS,
                                json={"q": "京都红叶", "mode": "keyword"})
    assert (await resp.json())["fragment_ids"] == first["fragment_ids"]


async def test_exclusions_let_the_next_candidates_move_up(client: Any) -> None:
    everything = await search(client, q="京都 兽医 asyncio", mode="keyword", max_sessions=3)
    sessions = [f["session_id"] for f in everything["fragments"]]
    assert sorted(sessions) == ["cat", "code", "trip"]
    without = await search(client, q="京都 兽医 asyncio", mode="keyword", max_sessions=2,
                           exclude_session_ids=[sessions[0]],
                           exclude_fragment_ids=[everything["fragment_ids"][1]])
    assert [f["session_id"] for f in without["fragments"]] == [sessions[2]]


async def test_hybrid_uses_vectors_filled_by_the_job(client: Any, make_client: Any) -> None:
    # e5 puts this query at about 0.86 from the trip and 0.81 from the others
    client = await make_client(**SETTINGS, CONVERSATION_MIN_SCORE_THRESHOLD=0.84)
    app = client.server.app
    await services_of(app).jobs.run_until_idle()
    status = await (await client.get("/api/admin/conversation-embedding-status",
                                     headers=HEADERS)).json()
    assert status["vectors"]["done"] == status["vectors"]["total"] == 8
    found = await search(client, q="去日本关西玩的行程", mode="hybrid")
    assert found["mode"] == "hybrid" and found["keywords"]
    assert [f["session_id"] for f in found["fragments"]] == ["trip"]  # semantic only
    assert found["fragments"][0]["parts"]["keyword"] == 0.0


async def test_bad_parameters_are_refused(client: Any) -> None:
    for body, code in [({"q": ""}, "missing_query"), ({"q": "x", "max_sessions": 51},
                                                      "invalid_max_sessions"),
                       ({"q": "x", "context": 6}, "invalid_context"),
                       ({"q": "x", "mode": "fuzzy"}, "invalid_mode"),
                       ({"q": "x", "exclude_session_ids": "a"}, "invalid_exclude_session_ids"),
                       ({"q": "x", "other": 1}, "unknown_field")]:
        resp = await client.post("/api/chat/search-fragments", json=body, headers=HEADERS)
        assert resp.status == 400
        assert (await resp.json())["error"]["code"] == code


async def test_seen_ttl_excludes_until_expiry(client: Any) -> None:
    pool = services_of(client.server.app).database.pool
    await mark_fragments_seen(pool, "live", ["v1:a", "v1:b"], ttl_hours=6)
    assert await fragments_to_exclude(pool, "live", 6) == {"v1:a", "v1:b"}
    assert await fragments_to_exclude(pool, "other", 6) == set()
    async with cursor(pool) as cur:
        await execute(cur, "UPDATE conversation_fragment_seen SET seen_at = now() - interval '7h'"
                           " WHERE fragment_id = 'v1:a'")
    assert await fragments_to_exclude(pool, "live", 6) == {"v1:b"}
    assert await fragments_to_exclude(pool, "live", 0) == set()
    await mark_fragments_seen(pool, "live", ["v1:c"], ttl_hours=0)  # 0 = off: nothing kept
    assert await fragments_to_exclude(pool, "live", 6) == {"v1:b"}


def test_fragment_id_is_order_free_and_versioned() -> None:
    assert fragment_id([3, 1, 2]) == fragment_id([1, 2, 3, 3])
    assert fragment_id([1, 2]) != fragment_id([1, 2, 3])
    assert fragment_id([5]) == "v1:" + __import__("hashlib").sha256(
        b"chat-fragment:v1:5").hexdigest()[:32]


def _hit(message_id: int, session: str, at: datetime, cosine: float, keyword: float = 0.0
         ) -> MessageHit:
    """A candidate without a background: its centred cosine is its raw one."""
    return MessageHit(message_id, session, at, keyword=keyword, cosine=cosine, centred=cosine)


def test_a_weak_semantic_pool_is_not_stretched_to_full_marks() -> None:
    now = datetime(2026, 1, 10, tzinfo=UTC)
    weights = Weights(0.45, 0.35, 0.2)
    weak, weaker = _hit(1, "a", now, 0.82), _hit(2, "b", now, 0.81)
    flat = SemanticScale.of([0.82, 0.81, 0.81, 0.80, 0.80, 0.79, 0.79, 0.78], 0.78)
    ranked = rank_sessions([weak, weaker], now=now, weights=weights, scale=flat)
    assert ranked and all(r.parts["semantic"] < 0.5 for r in ranked)
    strong = _hit(3, "c", now - timedelta(days=3), 0.95)
    clear = SemanticScale.of([0.95] + [0.78 + 0.001 * i for i in range(39)], 0.78)
    ranked = rank_sessions([weak, strong], now=now, weights=weights, scale=clear)
    assert ranked[0].session_id == "c" and ranked[0].parts["semantic"] > 0.9
    assert ranked[1].parts["semantic"] < 0.3


def test_matched_messages_are_the_sessions_best_by_their_own_evidence() -> None:
    """A session's fragment names the message that matched best, whether by keyword or by
    meaning, on one scale (a raw cosine of 0.8 is no match by itself)."""
    now = datetime(2026, 1, 10, tzinfo=UTC)
    scale = SemanticScale.of([0.90] + [0.78 + 0.002 * i for i in range(39)], 0.78)
    messages = [_hit(1, "s", now, 0.79, keyword=0.3),  # one weak keyword
                _hit(2, "s", now, 0.90),  # the clear semantic match
                _hit(3, "s", now, 0.80),
                _hit(4, "s", now, 0.87),
                _hit(5, "s", now, 0.70)]  # below the floor: not a match
    ranked = rank_sessions(messages, now=now, weights=Weights(0.45, 0.35, 0.0), scale=scale)
    assert [m.hit.id for m in ranked[0].matched] == [2, 4, 1]
    assert ranked[0].matched_ids == [1, 2, 4]


def test_recency_orders_equals_without_overruling_relevance() -> None:
    now = datetime(2026, 1, 10, tzinfo=UTC)
    weights = Weights(0.45, 0.35, 0.2)
    old_match = MessageHit(1, "old", now - timedelta(days=400), keyword=1.0)
    new_near = MessageHit(2, "new", now - timedelta(hours=1), keyword=0.5)
    ranked = rank_sessions([old_match, new_near], now=now, weights=weights)
    assert [r.session_id for r in ranked] == ["old", "new"]
    twin = MessageHit(3, "twin", now - timedelta(days=2), keyword=1.0)
    ranked = rank_sessions([old_match, twin], now=now, weights=weights)
    assert [r.session_id for r in ranked] == ["twin", "old"]


def test_inject_block_uses_local_time() -> None:
    block = format_retrieved_conversations([{"messages": [
        {"role": "user", "content": "凌晨的问题", "created_at": "2026-01-01T17:30:00+00:00"},
        {"role": "assistant", "content": "回答\n换行", "created_at": "2026-01-01T17:31:00+00:00"},
    ]}], timezone_hours=8)
    assert block == ("<retrieved_conversations>\n[2026-01-02 01:30] 用户: 凌晨的问题\n"
                     "[2026-01-02 01:31] AI: 回答 换行\n</retrieved_conversations>")
    assert format_retrieved_conversations([], 8) == ""


async def test_rebuild_indexes_rows_written_without_terms(client: Any) -> None:
    pool = services_of(client.server.app).database.pool
    async with cursor(pool) as cur:
        await execute(cur, "UPDATE conversations SET search_terms = NULL")
    resp = await client.post("/api/admin/rebuild-conversation-search", headers=HEADERS)
    assert resp.status == 202
    body = await resp.json()
    assert body["indexed"] == 8
    assert body["keyword_index"] == {"indexed": 8, "total": 8}
    found = await search(client, q="京都清水寺", mode="keyword")
    assert [f["session_id"] for f in found["fragments"]] == ["trip"]


async def test_a_search_indexes_messages_a_writer_left_without_terms(client: Any) -> None:
    pool = services_of(client.server.app).database.pool
    async with cursor(pool) as cur:
        await execute(cur, "UPDATE conversations SET search_terms = NULL")
    found = await search(client, q="京都清水寺", mode="keyword")
    assert [f["session_id"] for f in found["fragments"]] == ["trip"]


async def test_a_keyword_search_takes_two_statements(client: Any,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The keyword side is one statement: the matching messages, the document frequencies of
    their terms, whether a writer left messages without terms and a small collection's
    count come together (with the fragments' context, two round trips; there were five)."""
    await search(client, q="京都清水寺", mode="keyword")  # statistics and caches warm
    sent: list[str] = []
    original = BoundedStatements.execute

    def counted(self: BoundedStatements, query: Any, vars: Any = None) -> None:
        sent.append(str(query))
        original(self, query, vars)

    monkeypatch.setattr(BoundedStatements, "execute", counted)
    found = await search(client, q="京都清水寺", mode="keyword")
    monkeypatch.undo()
    assert [f["session_id"] for f in found["fragments"]] == ["trip"]
    assert len(sent) == 2, sent
