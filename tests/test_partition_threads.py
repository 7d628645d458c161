"""The /api/partition/* thread endpoints through the real app, the embedded database and the
fake upstream: status, list, switch, create, rename, delete and the summary editor."""

from __future__ import annotations

from typing import Any

from pawwake.db.pool import cursor, fetch_all, fetch_one
from pawwake.services import services_of
from tests.partition_support import CC, PARTITION, a, now_turn, say, system, u


async def _json(response: Any, status: int) -> Any:
    assert response.status == status, await response.text()
    return await response.json()


async def _error(response: Any, status: int, code: str) -> None:
    body = await _json(response, status)
    assert body["error"]["code"] == code
    assert body["error"]["message"]


async def _usage(client: Any, thread: str) -> tuple[int, int]:
    async with cursor(services_of(client.server.app).database.pool) as cur:
        row = await fetch_one(cur,
                              "SELECT count(*) AS n, COALESCE(sum(total_tokens), 0) AS t"
                              " FROM token_usage WHERE session_id = %s", (thread,))
    assert row is not None
    return int(row["n"]), int(row["t"])


async def test_status_counts_rounds_zones_and_progress(gateway: Any, upstream: Any) -> None:
    client = await gateway(**PARTITION)
    status = await _json(await client.get("/api/partition/status"), 200)
    assert status["active_thread"] == "default"
    assert (status["rounds_stored"], status["zone_a_rounds"], status["zone_b_rounds"],
            status["rounds_until_rotation"], status["summary_parts"]) == (0, 0, 0, 4, 0)
    for n in range(1, 4):
        await say(client, upstream, f"问{n}", f"答{n}")
    status = await _json(await client.get("/api/partition/status"), 200)
    assert (status["rounds_stored"], status["rounds_live"], status["zone_a_rounds"],
            status["zone_b_rounds"], status["rounds_until_rotation"]) == (3, 3, 2, 1, 1)
    assert status["last_summary_error"] is None and "summary_retry_after" not in status


async def test_status_after_rotation_shows_summary(gateway: Any, upstream: Any) -> None:
    client = await gateway(CACHE_SUMMARY_MODEL="test/summary", **PARTITION)
    for n in range(1, 5):
        await say(client, upstream, f"问{n}", f"答{n}")
    await say(client, upstream, "问5", "答5", summary="摘要一")
    status = await _json(await client.get("/api/partition/status"), 200)
    assert (status["rounds_stored"], status["rounds_live"], status["zone_a_rounds"],
            status["zone_b_rounds"], status["rotations"]) == (5, 3, 2, 1, 1)
    assert (status["summary_parts"], status["summary_chars"]) == (1, 3)


async def test_threads_list_every_session_with_flags(gateway: Any, upstream: Any) -> None:
    client = await gateway(**PARTITION)
    listed = await _json(await client.get("/api/partition/threads"), 200)
    assert listed["threads"] == [{"thread_id": "default", "messages": 0,
                                  "last_activity": None, "active": True,
                                  "has_summary": False}]
    await say(client, upstream, "问1", "答1")
    await _json(await client.put("/api/partition/summary",
                                 json={"thread_id": "other", "summary": "旧事"}), 200)
    threads = {t["thread_id"]: t for t in
               (await _json(await client.get("/api/partition/threads"), 200))["threads"]}
    assert threads["default"]["messages"] == 2 and threads["default"]["active"]
    assert threads["default"]["last_activity"] is not None
    assert not threads["default"]["has_summary"]
    assert threads["other"] == {"thread_id": "other", "messages": 0, "last_activity": None,
                                "active": False, "has_summary": True}


async def test_switch_then_chat_uses_new_thread_and_survives_restart(
        gateway: Any, upstream: Any) -> None:
    client = await gateway(**PARTITION)
    await say(client, upstream, "旧问", "旧答")
    await _error(await client.post("/api/partition/switch", json={"thread_id": ""}), 400,
                 "invalid_thread_id")
    await _error(await client.post("/api/partition/switch", json={}), 400,
                 "invalid_thread_id")
    await _error(await client.post("/api/partition/switch", data=b"{",
                                   headers={"Content-Type": "application/json"}), 400,
                 "invalid_json")
    body = await _json(await client.post("/api/partition/switch",
                                         json={"thread_id": "work"}), 200)
    assert body == {"active_thread": "work"}
    assert await say(client, upstream, "新问", "新答") == [now_turn("新问")]
    assert await say(client, upstream, "新问2", "新答2") == [
        u("新问"), a("新答"), now_turn("新问2")]
    async with cursor(services_of(client.server.app).database.pool) as cur:
        rows = await fetch_all(cur,
                               "SELECT session_id, content FROM conversations ORDER BY id")
    assert [(r["session_id"], r["content"]) for r in rows] == [
        ("default", "旧问"), ("default", "旧答"), ("work", "新问"), ("work", "新答"),
        ("work", "新问2"), ("work", "新答2")]
    restarted = await gateway(**PARTITION)
    status = await _json(await restarted.get("/api/partition/status"), 200)
    assert status["active_thread"] == "work"
    assert status["rounds_stored"] == 2
    assert await say(restarted, upstream, "新问3", "新答3") == [
        u("新问"), a("新答"), u("新问2"), a("新答2", CC), now_turn("新问3")]


async def test_create_with_and_without_inherited_summary(gateway: Any, upstream: Any) -> None:
    client = await gateway(persona="P", **PARTITION)
    await _json(await client.put("/api/partition/summary",
                                 json={"thread_id": "default", "summary": "前情"}), 200)
    created = await _json(await client.post(
        "/api/partition/thread", json={"thread_id": "next", "inherit_summary_from": "default"}),
        201)
    assert created == {"thread_id": "next", "summary_parts": 1, "inherited_from": "default"}
    blank = await _json(await client.post("/api/partition/thread", json={"thread_id": "blank"}),
                        201)
    assert blank["summary_parts"] == 0
    await _error(await client.post("/api/partition/thread", json={"thread_id": "next"}), 409,
                 "conflict")
    await _error(await client.post("/api/partition/thread",
                                   json={"thread_id": "x2", "inherit_summary_from": "nope"}),
                 404, "not_found")
    await _error(await client.post("/api/partition/thread", json={"thread_id": 5}), 400,
                 "invalid_thread_id")
    await _error(await client.post("/api/partition/thread",
                                   json={"thread_id": "y", "extra": 1}), 400, "unknown_field")
    await _error(await client.post("/api/partition/thread", json=["y"]), 400, "invalid_body")
    summary = await _json(await client.get("/api/partition/summary?thread_id=next"), 200)
    assert summary["parts"] == ["前情"]
    await _json(await client.post("/api/partition/switch", json={"thread_id": "next"}), 200)
    assert await say(client, upstream, "继续", "好") == [system("P", ["前情"]),
                                                         now_turn("继续")]


async def test_rename_moves_messages_usage_and_state_in_one_go(gateway: Any,
                                                               upstream: Any) -> None:
    client = await gateway(**PARTITION)
    await say(client, upstream, "问1", "答1")
    await say(client, upstream, "问2", "答2")
    await _json(await client.put("/api/partition/summary",
                                 json={"thread_id": "default", "summary": "摘要"}), 200)
    before = await _usage(client, "default")
    assert before == (2, 36)
    await _json(await client.post("/api/partition/thread", json={"thread_id": "taken"}), 201)
    await _error(await client.put("/api/partition/thread/rename",
                                  json={"old_id": "default", "new_id": "taken"}), 409,
                 "conflict")
    await _error(await client.put("/api/partition/thread/rename",
                                  json={"old_id": "ghost", "new_id": "free"}), 404,
                 "not_found")
    await _error(await client.put("/api/partition/thread/rename",
                                  json={"old_id": "default", "new_id": ""}), 400,
                 "invalid_new_id")
    await _error(await client.put("/api/partition/thread/rename",
                                  json={"old_id": "default", "new_id": "default"}), 400,
                 "same_thread_id")
    assert await _usage(client, "default") == before  # failed renames changed nothing
    renamed = await _json(await client.put("/api/partition/thread/rename",
                                           json={"old_id": "default", "new_id": "家"}), 200)
    assert renamed == {"old_id": "default", "new_id": "家", "switched": True, "messages": 4,
                       "usage_rows": 2, "state_rows": 1}
    assert await _usage(client, "家") == before
    assert await _usage(client, "default") == (0, 0)
    status = await _json(await client.get("/api/partition/status"), 200)
    assert (status["active_thread"], status["rounds_stored"], status["summary_parts"]) == (
        "家", 2, 1)
    assert await say(client, upstream, "问3", "答3") == [
        system(None, ["摘要"]), u("问1"), a("答1"), u("问2"), a("答2", CC),
        now_turn("问3")]
    assert await _usage(client, "家") == (3, 54)
    restarted = await gateway(**PARTITION)
    status = await _json(await restarted.get("/api/partition/status"), 200)
    assert status["active_thread"] == "家"


async def test_rename_of_inactive_thread_keeps_active(gateway: Any, upstream: Any) -> None:
    client = await gateway(**PARTITION)
    await _json(await client.post("/api/partition/thread", json={"thread_id": "side"}), 201)
    renamed = await _json(await client.put("/api/partition/thread/rename",
                                           json={"old_id": "side", "new_id": "side2"}), 200)
    assert renamed["switched"] is False and renamed["state_rows"] == 1
    status = await _json(await client.get("/api/partition/status"), 200)
    assert status["active_thread"] == "default"


async def test_delete_trashes_messages_and_drops_state(gateway: Any, upstream: Any) -> None:
    client = await gateway(**PARTITION)
    await say(client, upstream, "问1", "答1")
    await _error(await client.delete("/api/partition/thread/default"), 409, "conflict")
    await _json(await client.post("/api/partition/switch", json={"thread_id": "fresh"}), 200)
    await _json(await client.put("/api/partition/summary",
                                 json={"thread_id": "default", "summary": "旧"}), 200)
    deleted = await _json(await client.delete("/api/partition/thread/default"), 200)
    assert deleted == {"thread_id": "default", "trashed_messages": 2, "state_deleted": True}
    pool = services_of(client.server.app).database.pool
    async with cursor(pool) as cur:
        rows = await fetch_all(cur, "SELECT deleted_at IS NOT NULL AS trashed FROM conversations"
                                    " WHERE session_id = 'default'")
    assert [r["trashed"] for r in rows] == [True, True]
    async with cursor(pool) as cur:
        assert await fetch_one(cur, "SELECT 1 FROM partition_state WHERE thread_id = 'default'") \
            is None
    trash = await _json(await client.get("/api/conversations?trash=true"), 200)
    assert "default" in str(trash)
    threads = (await _json(await client.get("/api/partition/threads"), 200))["threads"]
    assert [t["thread_id"] for t in threads] == ["fresh"]
    await _error(await client.delete("/api/partition/thread/default"), 404, "not_found")
    # The trashed messages come back through the conversation trash.
    restored = await _json(await client.post("/api/conversations/default/restore"), 200)
    assert restored["messages"] == 2


async def test_summary_view_replace_and_clear(gateway: Any, upstream: Any) -> None:
    client = await gateway(**PARTITION)
    empty = await _json(await client.get("/api/partition/summary?thread_id=default"), 200)
    assert empty == {"thread_id": "default", "parts": [], "summary": "", "chars": 0}
    await _error(await client.get("/api/partition/summary"), 400, "invalid_thread_id")
    await _error(await client.put("/api/partition/summary",
                                  json={"thread_id": "default", "summary": 3}), 400,
                 "invalid_summary")
    await _error(await client.delete("/api/partition/summary?thread_id="), 400,
                 "invalid_thread_id")
    pool = services_of(client.server.app).database.pool
    await pool_exec(pool, "INSERT INTO partition_state (thread_id, summary_parts,"
                          " last_summary_error) VALUES ('default', '[\"一\", \"二\"]', 'boom')")
    two = await _json(await client.get("/api/partition/summary?thread_id=default"), 200)
    assert two["parts"] == ["一", "二"] and two["chars"] == 2
    status = await _json(await client.get("/api/partition/status"), 200)
    assert status["last_summary_error"] == "boom"
    one = await _json(await client.put("/api/partition/summary",
                                       json={"thread_id": "default", "summary": "合并后"}), 200)
    assert one["parts"] == ["合并后"]
    assert await say(client, upstream, "问", "答") == [system(None, ["合并后"]), now_turn("问")]
    cleared = await _json(await client.delete("/api/partition/summary?thread_id=default"), 200)
    assert cleared["parts"] == []
    assert await say(client, upstream, "问2", "答2") == [u("问"), a("答"), now_turn("问2")]


async def pool_exec(pool: Any, sql: str) -> None:
    async with pool.acquire() as conn, conn.cursor() as cur:
        await cur.execute(sql)


async def test_without_database_is_503(gateway: Any) -> None:
    client = await gateway(DATABASE_ENABLED=False)
    await _error(await client.get("/api/partition/status"), 503, "database_unavailable")
