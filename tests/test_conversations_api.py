"""Conversation management API: list/search, messages, edit, trash, merge, import, export."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pawwake.db.pool import cursor, execute, fetch_all
from pawwake.services import services_of

KEY = "conversations-gateway-key-0123456789"
HEADERS = {"X-Gateway-Key": KEY}
SETTINGS = {"GATEWAY_SECRET": KEY, "JOB_WORKERS": 0, "CONVERSATION_RECALL_ENABLED": True}

SEED = [
    {"session_id": "kyoto", "messages": [
        {"role": "user", "content": "下个月去京都旅行，清水寺那天怎么安排",
         "created_at": "2026-01-01T10:00:00Z"},
        {"role": "assistant", "content": "早上七点到清水寺，中午去二年坂吃汤豆腐。",
         "created_at": "2026-01-01T10:00:05Z", "model": "m1",
         "metadata": {"reasoning_content": "plan"}}]},
    {"session_id": "cat", "role": "user", "content": "My cat stopped eating her kibble",
     "created_at": "2026-01-02T09:00:00Z"},
    {"session_id": "cat", "role": "assistant", "content": "Try a new flavour or see a vet.",
     "created_at": "2026-01-02T09:00:03Z"},
    {"session_id": "code", "messages": [
        {"role": "user", "content": "How does asyncio gather work?",
         "created_at": "2026-01-03T08:00:00Z"},
        {"role": "assistant", "content": "It awaits several coroutines at once.",
         "created_at": "2026-01-03T08:00:02Z"}]},
]


def pool_of(client: Any) -> Any:
    return services_of(client.server.app).database.pool


async def add_usage(client: Any, session_id: str, prompt: int, completion: int,
                    usage_type: str = "chat") -> None:
    async with cursor(pool_of(client)) as cur:
        await execute(cur,
                      "INSERT INTO token_usage (session_id, model, prompt_tokens, completion_tokens,"
                      " total_tokens, usage_type) VALUES (%s, 'm1', %s, %s, %s, %s)",
                      (session_id, prompt, completion, prompt + completion, usage_type))


async def all_rows(client: Any) -> list[dict[str, Any]]:
    async with cursor(pool_of(client)) as cur:
        return await fetch_all(cur, "SELECT * FROM conversations ORDER BY id")


@pytest.fixture
async def api(make_client: Any) -> Any:
    client = await make_client(**SETTINGS)
    resp = await client.post("/api/conversations/import", json=SEED, headers=HEADERS)
    assert resp.status == 201, await resp.text()
    await add_usage(client, "kyoto", 100, 20)
    await add_usage(client, "kyoto", 50, 10, "extract")
    await add_usage(client, "cat", 30, 5)
    return client


async def get_json(client: Any, path: str, status: int = 200, **params: Any) -> Any:
    resp = await client.get(path, params=params, headers=HEADERS)
    assert resp.status == status, await resp.text()
    return await resp.json()


async def call(client: Any, method: str, path: str, status: int, body: Any = None,
               **params: Any) -> Any:
    resp = await client.request(method, path, json=body, params=params, headers=HEADERS)
    assert resp.status == status, await resp.text()
    return await resp.json()


async def test_list_pages_newest_first_with_counts_preview_and_tokens(api: Any) -> None:
    page = await get_json(api, "/api/conversations", limit=2)
    assert page["total"] == 3
    assert [i["session_id"] for i in page["items"]] == ["code", "cat"]
    cat = page["items"][1]
    assert cat["message_count"] == 2 and cat["preview"] == "My cat stopped eating her kibble"
    assert (cat["prompt_tokens"], cat["completion_tokens"], cat["total_tokens"]) == (30, 5, 35)
    assert cat["last_activity"].startswith("2026-01-02T09:00:03")
    rest = await get_json(api, "/api/conversations", limit=2, offset=2)
    assert [i["session_id"] for i in rest["items"]] == ["kyoto"]
    assert rest["items"][0]["total_tokens"] == 180
    past = await get_json(api, "/api/conversations", limit=2, offset=10)
    assert past["total"] == 3 and past["items"] == []


async def test_search_by_phrase_chinese_english_and_partial_words(api: Any) -> None:
    async def found(q: str) -> list[str]:
        page = await get_json(api, "/api/conversations", q=q)
        return [i["session_id"] for i in page["items"]]
    assert await found("清水寺") == ["kyoto"]
    assert await found("二年坂吃汤豆腐") == ["kyoto"]
    assert await found("asyncio gather") == ["code"]
    assert await found("kibb") == ["cat"]  # a partial word: the text scan finds it
    assert await found("京都 asyncio") == []  # every part in one message
    assert await found("nothing like this") == []


async def test_list_rejects_bad_parameters(api: Any) -> None:
    for params, code in [({"limit": "0"}, "invalid_limit"), ({"limit": "x"}, "invalid_limit"),
                         ({"offset": "-1"}, "invalid_offset"), ({"trash": "maybe"},
                                                                 "invalid_trash")]:
        body = await get_json(api, "/api/conversations", 400, **params)
        assert body["error"]["code"] == code
    resp = await api.get("/api/conversations")
    assert resp.status == 401


async def test_messages_of_a_session_and_unknown_session(api: Any) -> None:
    body = await get_json(api, "/api/conversations/kyoto/messages")
    assert [m["role"] for m in body["messages"]] == ["user", "assistant"]
    assert body["messages"][1]["metadata"] == {"reasoning_content": "plan"}
    assert body["messages"][1]["model"] == "m1"
    missing = await get_json(api, "/api/conversations/nope/messages", 404)
    assert missing["error"]["code"] == "not_found"


async def test_edit_reindexes_and_validates(api: Any) -> None:
    messages = (await get_json(api, "/api/conversations/cat/messages"))["messages"]
    first = messages[0]["id"]
    edited = await call(api, "PUT", f"/api/conversations/messages/{first}", 200,
                        {"content": "My parrot refuses sunflower seeds"})
    assert edited["content"] == "My parrot refuses sunflower seeds"
    async with cursor(pool_of(api)) as cur:
        rows = await fetch_all(cur, "SELECT search_terms FROM conversations WHERE id = %s",
                               (first,))
    assert "parrot" in rows[0]["search_terms"] and "cat" not in rows[0]["search_terms"]
    page = await get_json(api, "/api/conversations", q="parrot")
    assert [i["session_id"] for i in page["items"]] == ["cat"]
    assert (await call(api, "PUT", f"/api/conversations/messages/{first}", 400,
                       {"content": "  "}))["error"]["code"] == "invalid_content"
    assert (await call(api, "PUT", f"/api/conversations/messages/{first}", 400,
                       {"text": "x"}))["error"]["code"] == "invalid_body"
    assert (await call(api, "PUT", "/api/conversations/messages/abc", 400,
                       {"content": "x"}))["error"]["code"] == "invalid_message_id"
    assert (await call(api, "PUT", "/api/conversations/messages/999999", 404,
                       {"content": "x"}))["error"]["code"] == "not_found"
    resp = await api.put(f"/api/conversations/messages/{first}", data=b"{nope",
                         headers=HEADERS)
    assert resp.status == 400 and (await resp.json())["error"]["code"] == "invalid_json"


async def test_delete_and_restore_one_message(api: Any) -> None:
    messages = (await get_json(api, "/api/conversations/kyoto/messages"))["messages"]
    reply = messages[1]["id"]
    deleted = await call(api, "DELETE", f"/api/conversations/messages/{reply}", 200)
    assert deleted["deleted_at"] is not None
    live = (await get_json(api, "/api/conversations/kyoto/messages"))["messages"]
    assert [m["id"] for m in live] == [messages[0]["id"]]
    edit = await call(api, "PUT", f"/api/conversations/messages/{reply}", 409, {"content": "x"})
    assert edit["error"]["code"] == "conflict"
    restored = await call(api, "POST", f"/api/conversations/messages/{reply}/restore", 200)
    assert restored["deleted_at"] is None
    assert len((await get_json(api, "/api/conversations/kyoto/messages"))["messages"]) == 2
    await call(api, "DELETE", "/api/conversations/messages/999999", 404)


async def test_trash_then_restore_is_lossless(api: Any) -> None:
    messages = (await get_json(api, "/api/conversations/kyoto/messages"))["messages"]
    # A message deleted on its own before the session goes to the trash stays deleted.
    await call(api, "POST", "/api/conversations/import", 201, [
        {"session_id": "kyoto", "role": "user", "content": "删掉的这句",
         "created_at": "2026-01-01T11:00:00Z"}])
    extra = (await get_json(api, "/api/conversations/kyoto/messages"))["messages"][-1]["id"]
    await call(api, "DELETE", f"/api/conversations/messages/{extra}", 200)
    before = await all_rows(api)

    trashed = await call(api, "DELETE", "/api/conversations/kyoto", 200)
    assert trashed == {"session_id": "kyoto", "permanent": False, "messages": 2}
    live = await get_json(api, "/api/conversations")
    assert "kyoto" not in [i["session_id"] for i in live["items"]]
    trash = await get_json(api, "/api/conversations", trash="true")
    assert [i["session_id"] for i in trash["items"]] == ["kyoto"]
    assert trash["items"][0]["message_count"] == 3
    assert trash["items"][0]["trashed_at"] is not None
    assert all(i["trashed_at"] is None for i in live["items"])
    shown = await get_json(api, "/api/conversations/kyoto/messages")
    assert len(shown["messages"]) == 3  # a trashed session shows its trashed messages

    restored = await call(api, "POST", "/api/conversations/kyoto/restore", 200)
    assert restored["messages"] == 2
    assert await all_rows(api) == before
    assert [m["id"] for m in (await get_json(api, "/api/conversations/kyoto/messages")
                              )["messages"]] == [m["id"] for m in messages]
    again = await call(api, "POST", "/api/conversations/kyoto/restore", 409)
    assert again["error"]["code"] == "conflict"
    await call(api, "POST", "/api/conversations/nope/restore", 404)
    await call(api, "DELETE", "/api/conversations/nope", 404)


async def test_permanent_delete_only_from_the_trash(api: Any) -> None:
    refused = await call(api, "DELETE", "/api/conversations/kyoto", 409, permanent="true")
    assert "trash" in refused["error"]["message"]
    assert len(await all_rows(api)) == 6
    await call(api, "DELETE", "/api/conversations/kyoto", 200)
    gone = await call(api, "DELETE", "/api/conversations/kyoto", 200, permanent="true")
    assert gone == {"session_id": "kyoto", "permanent": True, "messages": 2, "usage_rows": 2}
    rows = await all_rows(api)
    assert {r["session_id"] for r in rows} == {"cat", "code"}
    async with cursor(pool_of(api)) as cur:
        usage = await fetch_all(cur, "SELECT session_id FROM token_usage")
    assert [u["session_id"] for u in usage] == ["cat"]
    await call(api, "DELETE", "/api/conversations/kyoto", 404, permanent="true")


async def test_batch_delete_counts_and_permanent_rules(api: Any) -> None:
    trashed = await call(api, "POST", "/api/conversations/batch-delete", 200,
                         {"session_ids": ["kyoto", "cat", "ghost"]})
    assert trashed == {"sessions": 2, "messages": 4, "missing": ["ghost"], "permanent": False}
    refused = await call(api, "POST", "/api/conversations/batch-delete", 409,
                         {"session_ids": ["kyoto", "code"], "permanent": True})
    assert refused["error"]["code"] == "conflict"
    assert len(await all_rows(api)) == 6  # the whole batch rolled back
    purged = await call(api, "POST", "/api/conversations/batch-delete", 200,
                        {"session_ids": ["kyoto", "cat"], "permanent": True})
    assert purged == {"sessions": 2, "messages": 4, "missing": [], "permanent": True,
                      "usage_rows": 3}
    for body, code in [({}, "invalid_session_ids"), ({"session_ids": []}, "invalid_session_ids"),
                       ({"session_ids": [5]}, "invalid_session_ids"),
                       ({"session_ids": ["a"], "permanent": "yes"}, "invalid_permanent"),
                       ({"session_ids": ["a"], "x": 1}, "unknown_field")]:
        bad = await call(api, "POST", "/api/conversations/batch-delete", 400, body)
        assert bad["error"]["code"] == code


async def test_merge_moves_messages_and_keeps_token_totals(api: Any) -> None:
    async def totals() -> tuple[int, int]:
        page = await get_json(api, "/api/conversations", limit=50)
        return (sum(i["message_count"] for i in page["items"]),
                sum(i["total_tokens"] for i in page["items"]))
    before = await totals()
    merged = await call(api, "POST", "/api/admin/merge-sessions", 200,
                        {"source_ids": ["cat", "code"], "target_id": "kyoto"})
    assert merged["moved"] == {"messages": 4, "usage_rows": 1}
    assert merged["target"] == {"messages": 6, "prompt_tokens": 180,
                                "completion_tokens": 35, "total_tokens": 215}
    assert await totals() == before
    page = await get_json(api, "/api/conversations")
    assert [i["session_id"] for i in page["items"]] == ["kyoto"]
    assert page["items"][0]["total_tokens"] == 215
    times = [m["created_at"] for m in (await get_json(
        api, "/api/conversations/kyoto/messages"))["messages"]]
    assert times == sorted(times) and len(times) == 6
    missing = await call(api, "POST", "/api/admin/merge-sessions", 404,
                         {"source_ids": ["ghost"], "target_id": "kyoto"})
    assert missing["error"]["code"] == "not_found"
    same = await call(api, "POST", "/api/admin/merge-sessions", 400,
                      {"source_ids": ["kyoto"], "target_id": "kyoto"})
    assert same["error"]["code"] == "invalid_source_ids"
    await call(api, "POST", "/api/admin/merge-sessions", 400, {"source_ids": "kyoto",
                                                                "target_id": "x"})


async def test_merge_into_a_new_session_name(api: Any) -> None:
    merged = await call(api, "POST", "/api/admin/merge-sessions", 200,
                        {"source_ids": ["cat"], "target_id": "pets"})
    assert merged["target"]["messages"] == 2 and merged["target"]["total_tokens"] == 35
    await get_json(api, "/api/conversations/cat/messages", 404)


async def test_import_twice_changes_nothing_and_export_round_trips(api: Any) -> None:
    before = await all_rows(api)
    again = await call(api, "POST", "/api/conversations/import", 200, SEED)
    assert again == {"sessions": 3, "received": 6, "imported": 0, "skipped": 6}
    assert await all_rows(api) == before
    resp = await api.get("/api/conversations/export", headers=HEADERS)
    assert resp.status == 200
    assert resp.headers["Content-Disposition"].startswith("attachment;")
    exported = json.loads(await resp.read())
    assert [s["session_id"] for s in exported] == ["cat", "code", "kyoto"]
    assert exported[2]["messages"][1]["metadata"] == {"reasoning_content": "plan"}
    reimport = await call(api, "POST", "/api/conversations/import", 200, exported)
    assert reimport["imported"] == 0
    assert await all_rows(api) == before


async def test_import_into_an_empty_database_from_an_export(api: Any) -> None:
    exported = await get_json(api, "/api/conversations/export")
    async with cursor(pool_of(api)) as cur:
        await execute(cur, "DELETE FROM conversations")
    done = await call(api, "POST", "/api/conversations/import", 201, exported)
    assert done["imported"] == 6
    page = await get_json(api, "/api/conversations", q="清水寺")
    assert [i["session_id"] for i in page["items"]] == ["kyoto"]


async def test_import_is_validated_before_anything_is_written(api: Any) -> None:
    before = await all_rows(api)
    good = {"session_id": "new", "role": "user", "content": "hi",
            "created_at": "2026-02-01T00:00:00Z"}
    cases = [
        ({"not": "a list"}, "invalid_body"), ([], "invalid_body"),
        ([good, {**good, "role": "robot"}], "invalid_role"),
        ([good, {**good, "created_at": "yesterday"}], "invalid_created_at"),
        ([good, {**good, "created_at": None}], "invalid_created_at"),
        ([good, {**good, "session_id": ""}], "invalid_session_id"),
        ([good, {**good, "metadata": [1]}], "invalid_metadata"),
        ([good, {**good, "content": 5}], "invalid_content"),
        ([good, {**good, "colour": "red"}], "unknown_field"),
        ([{"session_id": "s", "messages": "no"}], "invalid_session"),
    ]
    for body, code in cases:
        bad = await call(api, "POST", "/api/conversations/import", 400, body)
        assert bad["error"]["code"] == code, body
    assert await all_rows(api) == before


async def test_without_a_database_the_api_answers_503(make_client: Any) -> None:
    client = await make_client(GATEWAY_SECRET=KEY, DATABASE_ENABLED=False)
    body = await get_json(client, "/api/conversations", 503)
    assert body["error"]["code"] == "database_unavailable"


async def test_merge_refuses_sessions_sharing_a_sidecar_turn_id(api: Any) -> None:
    for session in ("left", "right"):
        resp = await api.post("/api/conversations/turn", headers=HEADERS, json={
            "turn_id": "same-turn", "session_id": session, "source": "claude-code",
            "messages": [{"role": "user", "content": f"hello from {session}"}]})
        assert resp.status == 201, await resp.text()
    before = await all_rows(api)
    refused = await call(api, "POST", "/api/admin/merge-sessions", 409,
                         {"source_ids": ["left"], "target_id": "right"})
    assert "turn id" in refused["error"]["message"]
    assert await all_rows(api) == before
