"""Starting on a Pawwake 4.x database: it is recognised, kept aside and adopted in place.

Each test builds a real 4.0.x or 4.1.x database (``tests/legacy_fixtures.py``) on the
embedded server, starts the real app on it and checks the adopted rows one by one.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from bs4 import BeautifulSoup

from pawwake.app import create_app
from pawwake.db.pool import cursor, fetch_all
from pawwake.services import services_of
from pawwake.settings import Settings
from tests.dashboard_support import PASSWORD, SECRET, login
from tests.embedding_server import FakeEmbeddings, serve_embeddings
from tests.legacy_fixtures import (
    FRAGMENT_ID,
    GEMINI_CALL,
    SUMMARY_PART,
    THREAD,
    LegacyDatabase,
    build_40,
    build_41,
    empty_database,
    fingerprint,
    vector,
)

__all__ = ["empty_database"]  # the fixture, used by name
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def legacy_settings(upstream: Any, tmp_path: Path) -> Callable[..., Settings]:
    def build(db: LegacyDatabase, **overrides: Any) -> Settings:
        values: dict[str, Any] = {
            "DATABASE_URL": db.uri, "API_BASE_URL": upstream.base_url,
            "PAWWAKE_DATA_DIR": str(tmp_path / "data"), "JOB_WORKERS": 0,
            "DEFAULT_MODEL": "test/model-a"}
        values.update(overrides)
        return Settings.from_env({}, **values)
    return build


@pytest.fixture
async def embeddings(aiohttp_server: Any) -> FakeEmbeddings:
    return await serve_embeddings(aiohttp_server)


async def start(aiohttp_client: Any, settings: Settings) -> Any:
    return await aiohttp_client(create_app(settings))


async def rows(client: Any, sql: str, params: Any = None) -> list[dict[str, Any]]:
    async with cursor(services_of(client.server.app).database.pool) as cur:
        return await fetch_all(cur, sql, params)


async def test_a_41_database_starts_ready_with_its_tables_kept_aside(
        empty_database: LegacyDatabase, legacy_settings: Any, aiohttp_client: Any,
        embeddings: FakeEmbeddings, caplog: pytest.LogCaptureFixture) -> None:
    build_41(empty_database, embeddings_url=embeddings.base_url)
    with caplog.at_level(logging.INFO, logger="pawwake.upgrade.adopt"):
        client = await start(aiohttp_client, legacy_settings(empty_database))
    logged = [r.getMessage() for r in caplog.records if r.name == "pawwake.upgrade.adopt"]
    assert ("adopted the Pawwake 4.1.x database: 13 memories, 15 messages, 3 token usage"
            " rows, 2 partition threads (2 with a summary), 12 saved settings") in logged
    assert "vectors: 2 memory and 2 message vectors kept; kept: text-embedding-3-small, 8" \
           " dimensions, as in force" in logged
    assert "not taken: 1 memories with blank content (ids 13)" in logged
    assert any(line.startswith("setting MEMORY_SEMANTIC_THRESHOLD: not_carried")
               for line in logged)
    health = await (await client.get("/")).json()
    assert health["database"] == "ready"
    kept = empty_database.rows(
        "SELECT tablename FROM pg_tables WHERE schemaname = 'pawwake4' ORDER BY 1")
    assert [r["tablename"] for r in kept] == [
        "adoption", "conversations", "gateway_config", "memories", "session_cache_state",
        "token_usage"]
    assert empty_database.rows("SELECT count(*) AS n FROM pawwake4.memories") == [{"n": 14}]
    adoption = await rows(client, "SELECT version, finished_at IS NOT NULL AS done"
                                  " FROM legacy_adoption")
    assert adoption == [{"version": "4.1.x", "done": True}]


async def test_a_40_database_starts_ready(empty_database: LegacyDatabase, legacy_settings: Any,
                                          aiohttp_client: Any) -> None:
    build_40(empty_database)
    client = await start(aiohttp_client, legacy_settings(empty_database))
    assert (await (await client.get("/")).json())["database"] == "ready"
    adoption = await rows(client, "SELECT version FROM legacy_adoption")
    assert adoption == [{"version": "4.0.x"}]


__all__ += ["FRAGMENT_ID", "GEMINI_CALL", "SUMMARY_PART", "THREAD", "vector"]


MEMORY_COLUMNS = ("id, content, importance, layer, title, is_active, source_session,"
                  " source_message_ids, merged_from, superseded_by, event_date::text AS day,"
                  " remind_at IS NOT NULL AS remind, reminder_delivered_at IS NOT NULL AS"
                  " delivered, reminder_claimed_at IS NOT NULL AS claimed, external_id")


async def test_41_memories_row_by_row(empty_database: LegacyDatabase, legacy_settings: Any,
                                      aiohttp_client: Any, embeddings: FakeEmbeddings) -> None:
    build_41(empty_database, embeddings_url=embeddings.base_url)
    client = await start(aiohttp_client, legacy_settings(empty_database))
    got = {r["id"]: r for r in await rows(client, f"SELECT {MEMORY_COLUMNS} FROM memories")}
    assert sorted(got) == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14]  # 13 is blank
    plain = {"title": None, "source_session": None, "source_message_ids": [],
             "merged_from": [], "superseded_by": None, "day": None, "remind": False,
             "delivered": False, "claimed": False, "external_id": None, "is_active": True}

    def expect(id_: int, content: str, importance: int, layer: int, **fields: Any) -> None:
        assert got[id_] == {**plain, "id": id_, "content": content, "importance": importance,
                            "layer": layer, **fields}, id_

    expect(1, "阿狸六月要考数学", 7, 1, source_session=THREAD, source_message_ids=[3, 4])
    expect(2, "周六去西湖野餐", 5, 1, is_active=False)
    expect(3, "野餐带了三明治", 4, 1, is_active=False)
    expect(4, "周末野餐：在西湖边吃三明治", 6, 2, title="周末野餐", merged_from=[2, 3],
           day="2026-05-02")
    expect(5, "住在北京", 6, 1, is_active=False, superseded_by=6)
    expect(6, "搬到了上海", 6, 1)
    expect(7, "阿狸对花生过敏", 9, 3)
    expect(8, "提醒：五月三日交论文", 5, 1, remind=True, delivered=True)
    expect(9, "提醒：今晚给妈妈打电话", 5, 1, remind=True, claimed=True)
    expect(10, "提醒：下周一体检", 5, 1, remind=True)
    expect(11, "很早以前的一条记忆", 5, 1)  # no layer, no importance: a plain fragment
    expect(12, "重要程度写错的记忆", 1, 1)
    expect(14, "日记：五月一日去了图书馆", 5, 1, external_id="diary-2026-05-01")

    # The API sees them as ours: the merge can be reverted, the chain viewed, ids go on.
    sources = await (await client.get("/api/memories/4/sources")).json()
    assert sorted(s["content"] for s in sources["sources"]) == ["周六去西湖野餐", "野餐带了三明治"]
    chain = await (await client.get("/api/memories/6/versions")).json()
    assert [v["content"] for v in chain["versions"]] == ["住在北京", "搬到了上海"]
    made = await (await client.post("/api/memories", json={"content": "新的一条"})).json()
    assert made["id"] == 15
    replay = await client.post("/api/memories", json={"content": "日记：五月一日去了图书馆",
                                                      "external_id": "diary-2026-05-01"})
    assert replay.status == 200 and (await replay.json())["id"] == 14


async def test_41_messages_keep_tool_calls_reasoning_and_signatures(
        empty_database: LegacyDatabase, legacy_settings: Any, aiohttp_client: Any,
        embeddings: FakeEmbeddings) -> None:
    build_41(empty_database, embeddings_url=embeddings.base_url)
    client = await start(aiohttp_client, legacy_settings(empty_database))
    got = {r["id"]: r for r in await rows(
        client, "SELECT id, session_id, role, content, metadata, deleted_at IS NOT NULL AS"
                " trashed, search_terms FROM conversations")}
    assert sorted(got) == list(range(1, 16))  # 16 has the role 'function'
    assert got[6] == {"id": 6, "session_id": THREAD, "role": "assistant", "content": "",
                      "metadata": {"tool_calls": [GEMINI_CALL],
                                   "reasoning_content": "先查一下天气"},
                      "trashed": False, "search_terms": None}
    assert got[6]["metadata"]["tool_calls"][0]["extra_content"]["google"][
        "thought_signature"] == "c2lnbmF0dXJlLTE="
    assert got[7]["metadata"] == {"tool_call_id": "call_weather_1", "name": "get_weather"}
    assert got[8]["metadata"] == {"reasoning_content": "天气结果是小雨"}
    assert got[1]["metadata"] == {} and got[1]["content"] == "第一轮：今天好累"
    assert got[14]["metadata"] == {"legacy_metadata": "{not json"}
    assert got[15]["trashed"] is True
    usage = await rows(client, "SELECT session_id, model, prompt_tokens, completion_tokens,"
                               " total_tokens, usage_type FROM token_usage ORDER BY id")
    assert usage == [
        {"session_id": THREAD, "model": "anthropic/claude-sonnet-4", "prompt_tokens": 1200,
         "completion_tokens": 300, "total_tokens": 1500, "usage_type": "chat"},
        {"session_id": THREAD, "model": "anthropic/claude-haiku-4.5", "prompt_tokens": 800,
         "completion_tokens": 200, "total_tokens": 1000, "usage_type": "summary"},
        {"session_id": "chatbox-1", "model": "anthropic/claude-sonnet-4", "prompt_tokens": 500,
         "completion_tokens": 100, "total_tokens": 600, "usage_type": "chat"}]


async def test_41_saved_settings_carried_renamed_or_reported(
        empty_database: LegacyDatabase, legacy_settings: Any, aiohttp_client: Any,
        embeddings: FakeEmbeddings) -> None:
    build_41(empty_database, embeddings_url=embeddings.base_url)
    client = await start(aiohttp_client, legacy_settings(empty_database))
    saved = {r["key"]: r["value"] for r in await rows(client,
                                                      "SELECT key, value FROM gateway_config")}
    assert saved == {
        "API_KEY": "sk-or-v1-old-key-0123456789", "DEFAULT_MODEL": "anthropic/claude-sonnet-4",
        "MEMORY_MODEL": "anthropic/claude-haiku-4.5", "SYSTEM_PROMPT": "你是阿澈，阿狸的伴侣。",
        "PARTITION_SESSION_ID": THREAD, "CACHE_PARTITION_ENABLED": True,
        "CACHE_PARTITION_X": 2, "MEMORY_HW_SEMANTIC": 0.5,
        "EMBEDDING_API_KEY": "sk-embedding-key-0123456789",
        "EMBEDDING_BASE_URL": embeddings.base_url, "EMBEDDING_MODEL": "text-embedding-3-small",
        "EMBEDDING_DIM": 8}
    settings = services_of(client.server.app).config.current()
    assert settings.SYSTEM_PROMPT == "你是阿澈，阿狸的伴侣。" and settings.CACHE_PARTITION_X == 2
    assert settings.MEMORY_HW_KEYWORD == 0.25  # 4.1.3's default was saved: ours applies
    assert settings.MEMORY_VECTOR_ENABLED is True
    assert settings.MEMORY_SEMANTIC_THRESHOLD is None
    step = (await rows(client, "SELECT counts FROM legacy_adoption_steps"
                               " WHERE step = 'settings'"))[0]["counts"]
    assert step["old_default"] == ["MEMORY_HW_KEYWORD", "MEMORY_VECTOR_ENABLED"]
    assert step["removed"] == ["MEMORY_API_KEY", "MEMORY_SOURCE_DEDUPE_ENABLED"]
    assert step["not_carried"] == ["MEMORY_SEMANTIC_THRESHOLD"]
    assert step["invalid"] == ["MAX_MEMORIES_INJECT"] and step["empty"] == [
        "CACHE_SUMMARY_MODEL"]
    assert step["renamed"] == ["partition_session_id", "systemPrompt"]


async def test_41_threads_summaries_and_seen_marks(
        empty_database: LegacyDatabase, legacy_settings: Any, aiohttp_client: Any,
        embeddings: FakeEmbeddings) -> None:
    build_41(empty_database, embeddings_url=embeddings.base_url)
    client = await start(aiohttp_client, legacy_settings(empty_database))
    states = {r["thread_id"]: r for r in await rows(
        client, "SELECT thread_id, summary_parts, zone_start_message_id, rotations"
                " FROM partition_state")}
    assert states == {
        THREAD: {"thread_id": THREAD, "summary_parts": [SUMMARY_PART],
                 "zone_start_message_id": 5, "rotations": 1},  # round 2 opens at message 5
        "old-thread": {"thread_id": "old-thread", "summary_parts": ["一段不是 JSON 的旧摘要"],
                       "zone_start_message_id": None, "rotations": 0}}
    assert await rows(client, "SELECT session_id, fragment_id FROM conversation_fragment_seen"
                      ) == [{"session_id": THREAD, "fragment_id": FRAGMENT_ID}]
    assert await rows(client, "SELECT session_id, memory_id FROM memory_seen") == [
        {"session_id": THREAD, "memory_id": 1}]  # 999 names no memory


async def test_41_vectors_kept_when_model_and_dimension_match(
        empty_database: LegacyDatabase, legacy_settings: Any, aiohttp_client: Any,
        embeddings: FakeEmbeddings) -> None:
    build_41(empty_database, embeddings_url=embeddings.base_url)
    client = await start(aiohttp_client, legacy_settings(empty_database))
    kept = await rows(client, "SELECT memory_id, provider, model, dim, embedding,"
                              " content_sha = encode(sha256(convert_to(m.content, 'UTF8')),"
                              " 'hex') AS current FROM memory_embeddings e"
                              " JOIN memories m ON m.id = e.memory_id ORDER BY memory_id")
    assert [(r["memory_id"], r["provider"], r["model"], r["dim"], r["current"])
            for r in kept] == [(1, "api", "text-embedding-3-small", 8, True),
                               (2, "api", "text-embedding-3-small", 8, True)]
    assert kept[0]["embedding"] == pytest.approx(vector(101), abs=1e-6)
    messages = await rows(client, "SELECT message_id, embedding FROM conversation_embeddings"
                                  " ORDER BY message_id")
    assert [r["message_id"] for r in messages] == [1, 2]
    assert messages[1]["embedding"] == pytest.approx(vector(2), abs=1e-6)
    flag = await rows(client, "SELECT value FROM runtime_flags"
                              " WHERE name = 'memory_embedding_provenance'")
    assert flag == [{"value": {"provider": "api", "model": "text-embedding-3-small", "dim": 8}}]
    jobs = await rows(client, "SELECT kind FROM jobs WHERE status = 'pending' ORDER BY kind")
    assert [j["kind"] for j in jobs] == ["keyword_reindex", "memory_embed"]


def text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(block.get("text", "") for block in content)
    return content or ""


async def test_the_next_partition_chat_uses_the_adopted_summary_and_zone_start(
        empty_database: LegacyDatabase, legacy_settings: Any, aiohttp_client: Any,
        embeddings: FakeEmbeddings, upstream: Any) -> None:
    build_41(empty_database, embeddings_url=embeddings.base_url)
    client = await start(aiohttp_client, legacy_settings(empty_database, MEMORY_ENABLED=False))
    upstream.reply_text("早上好")
    response = await client.post("/v1/chat/completions", json={
        "model": "test/model-a", "messages": [{"role": "user", "content": "第六轮：早上好"}]})
    assert response.status == 200, await response.text()
    sent = upstream.requests[-1].body["messages"]
    assert sent[0]["role"] == "system"
    assert "你是阿澈，阿狸的伴侣。" in text_of(sent[0]) and SUMMARY_PART in text_of(sent[0])
    history = [(m["role"], text_of(m)) for m in sent[1:-1]]
    assert history == [
        ("user", "第三轮：杭州明天天气怎么样"), ("assistant", ""),
        ("tool", "杭州明天小雨，18 度"), ("assistant", "明天杭州有小雨，记得带伞"),
        ("user", "第四轮：谢谢你"), ("assistant", "不客气"),
        ("user", "第五轮：晚安"), ("assistant", "晚安，好梦")]
    call = sent[2]
    assert call["tool_calls"] == [GEMINI_CALL] and call["reasoning_content"] == "先查一下天气"
    assert sent[3]["tool_call_id"] == "call_weather_1"
    assert sent[4]["reasoning_content"] == "天气结果是小雨"
    assert text_of(sent[-1]).endswith("第六轮：早上好")


async def test_40_database_row_by_row_and_its_vectors_made_again(
        empty_database: LegacyDatabase, legacy_settings: Any, aiohttp_client: Any) -> None:
    build_40(empty_database)
    client = await start(aiohttp_client, legacy_settings(empty_database))
    got = await rows(client, "SELECT id, content, importance, layer, title, is_active,"
                             " merged_from, event_date::text AS day FROM memories ORDER BY id")
    assert got == [
        {"id": 1, "content": "阿狸喜欢橘猫", "importance": 8, "layer": 1, "title": None,
         "is_active": True, "merged_from": [], "day": None},
        {"id": 2, "content": "第一次见面在咖啡馆", "importance": 6, "layer": 1, "title": None,
         "is_active": False, "merged_from": [], "day": None},
        {"id": 3, "content": "第一次见面那天下雨", "importance": 5, "layer": 1, "title": None,
         "is_active": False, "merged_from": [], "day": None},
        {"id": 4, "content": "初见：雨天的咖啡馆", "importance": 7, "layer": 2, "title": "初见",
         "is_active": True, "merged_from": [2, 3, 77], "day": "2026-04-01"},
        {"id": 5, "content": "核心：阿狸的生日是三月三日", "importance": 10, "layer": 3,
         "title": None, "is_active": True, "merged_from": [], "day": None}]
    assert len(await rows(client, "SELECT id FROM conversations")) == 12
    state = await rows(client, "SELECT summary_parts, zone_start_message_id FROM"
                               " partition_state")
    assert state == [{"summary_parts": [SUMMARY_PART], "zone_start_message_id": 5}]
    saved = {r["key"]: r["value"] for r in await rows(client,
                                                      "SELECT key, value FROM gateway_config")}
    assert saved == {"SYSTEM_PROMPT": "你是阿澈。", "PARTITION_SESSION_ID": THREAD,
                     "CACHE_PARTITION_X": 2}  # MEMORY_HW_RECENCY=0.15 was 4.1.3's default
    assert await rows(client, "SELECT value FROM runtime_flags"
                              " WHERE name = 'memory_embedding_provenance' AND"
                              " value->>'provider' = 'api'") == []
    # No EMBEDDING_API_KEY: the local model is in force; the JSON-text vectors are not kept
    # and the background job embeds every memory anew.
    await services_of(client.server.app).jobs.run_until_idle()
    embedded = await rows(client, "SELECT memory_id, provider FROM memory_embeddings"
                                  " ORDER BY memory_id")
    assert [(r["memory_id"], r["provider"]) for r in embedded] == [
        (n, "local") for n in range(1, 6)]


OUR_TABLES = ("memories", "conversations", "token_usage", "gateway_config", "partition_state",
              "memory_embeddings", "conversation_embeddings", "memory_seen",
              "conversation_fragment_seen", "legacy_adoption", "legacy_adoption_steps")


async def test_a_second_start_changes_nothing(empty_database: LegacyDatabase,
                                              legacy_settings: Any, aiohttp_client: Any,
                                              embeddings: FakeEmbeddings,
                                              caplog: pytest.LogCaptureFixture) -> None:
    build_41(empty_database, embeddings_url=embeddings.base_url)
    first = await start(aiohttp_client, legacy_settings(empty_database))
    await first.close()
    before = fingerprint(empty_database, ("public", "pawwake4"))
    jobs = empty_database.rows("SELECT count(*) AS n FROM jobs")
    caplog.clear()
    second = await start(aiohttp_client, legacy_settings(empty_database))
    assert (await (await second.get("/")).json())["database"] == "ready"
    await second.close()
    after = fingerprint(empty_database, ("public", "pawwake4"))
    assert {k: v for k, v in after["rows"].items() if "runtime_flags" not in k} == \
        {k: v for k, v in before["rows"].items() if "runtime_flags" not in k}
    assert after["relations"] == before["relations"]
    assert empty_database.rows("SELECT count(*) AS n FROM jobs") == jobs
    assert not [r for r in caplog.records if "adopt" in r.getMessage()]


async def test_rollback_puts_the_41_tables_back_exactly_and_a_new_start_adopts_again(
        empty_database: LegacyDatabase, legacy_settings: Any, aiohttp_client: Any,
        embeddings: FakeEmbeddings) -> None:
    build_41(empty_database, embeddings_url=embeddings.base_url)
    original = fingerprint(empty_database, ("public",))
    client = await start(aiohttp_client, legacy_settings(empty_database))
    await client.post("/api/memories", json={"content": "升级以后写的一条"})
    await client.close()

    message = empty_database.rows("SELECT pawwake4.roll_back_upgrade() AS m")[0]["m"]
    assert message.startswith("Pawwake 4.x tables are back in public")
    assert fingerprint(empty_database, ("public",)) == original
    aside = empty_database.rows("SELECT nspname FROM pg_namespace"
                                " WHERE nspname LIKE 'pawwake_rolled_back_%'")
    assert len(aside) == 1
    newer = aside[0]["nspname"]
    assert empty_database.rows(f"SELECT content FROM {newer}.memories WHERE id = 15") == [
        {"content": "升级以后写的一条"}]

    again = await start(aiohttp_client, legacy_settings(empty_database))
    assert (await (await again.get("/")).json())["database"] == "ready"
    assert len(await rows(again, "SELECT id FROM memories")) == 13


def run_pawwake(db: LegacyDatabase, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "DATABASE_URL": db.uri, "PAWWAKE_DATA_DIR": str(tmp_path / "cli")}
    return subprocess.run([sys.executable, str(ROOT / "pawwake.py"), *args], env=env,
                          capture_output=True, text=True, timeout=120, cwd=ROOT)


@pytest.mark.parametrize("build", [build_40, build_41])
def test_the_dry_run_reports_and_changes_nothing(empty_database: LegacyDatabase,
                                                 tmp_path: Path, build: Any) -> None:
    build(empty_database)
    before = fingerprint(empty_database)
    result = run_pawwake(empty_database, tmp_path, "--check-upgrade")
    assert result.returncode == 0, result.stderr
    assert fingerprint(empty_database) == before
    report = result.stdout
    if build is build_41:
        assert "Pawwake 4.1.x database found" in report
        assert ("memories: 13 (fragments 11, events 1, core 1; archived 3, merged 1,"
                " superseded 1; reminders 3: delivered 1, claimed 1)") in report
        assert ("messages: 15 in 2 conversations (tool calls 1, tool results 1, with reasoning"
                " 2, in the trash 1)") in report
        assert "token usage rows: 3 (3100 tokens)" in report
        assert "partition threads: 2 (with a summary 2, rotated 1)" in report
        assert "1 memories with blank content (ids 13)" in report
        assert "1 messages with a role other than system, user, assistant or tool (16 (function))"\
            in report
        assert "1 token usage rows of other types (mystery)" in report
        assert "setting MEMORY_SEMANTIC_THRESHOLD: not_carried" in report
        assert "setting MAX_MEMORIES_INJECT: invalid" in report
        assert "1 messages have metadata that is not a JSON object" in report
    else:
        assert "Pawwake 4.0.x database found" in report
        assert "memories: 5 (fragments 3, events 1, core 1; archived 2, merged 1" in report
        assert "1 memories without a known layer become fragments" in report
        assert "1 merge sources name a missing memory" in report
        assert "re-embedded in the background: the local model is in force" in report
    assert "Nothing was changed." in report


def test_the_dry_run_says_when_there_is_nothing_to_adopt(empty_database: LegacyDatabase,
                                                         tmp_path: Path) -> None:
    result = run_pawwake(empty_database, tmp_path, "--check-upgrade")
    assert result.returncode == 1
    assert "No Pawwake 4.x tables were found" in result.stdout


# A gateway process that adopts two rows per transaction and is killed (SIGKILL, nothing of
# it runs afterwards) as it starts the third batch of messages: two batches are committed.
KILLED_MIDWAY = """
import os, signal, sys
from pawwake.db.legacy import conversations
from pawwake.upgrade import adopt
adopt.BATCH = 2
real_copy, calls = conversations.copy_batch, []
async def copy_then_die(*args, **kwargs):
    calls.append(1)
    if len(calls) == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    return await real_copy(*args, **kwargs)
conversations.copy_batch = copy_then_die
sys.argv = ["pawwake.py", "--host", "127.0.0.1", "--port", "0"]
import runpy
runpy.run_path("pawwake.py", run_name="__main__")
"""


async def test_an_adoption_killed_midway_is_finished_by_the_next_start(
        empty_database: LegacyDatabase, legacy_settings: Any, aiohttp_client: Any,
        embeddings: FakeEmbeddings, tmp_path: Path) -> None:
    build_41(empty_database, embeddings_url=embeddings.base_url)
    env = {**os.environ, "DATABASE_URL": empty_database.uri, "JOB_WORKERS": "0",
           "PAWWAKE_DATA_DIR": str(tmp_path / "killed")}
    killed = await asyncio.create_subprocess_exec(
        sys.executable, "-c", KILLED_MIDWAY, env=env, cwd=ROOT,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    _out, err = await asyncio.wait_for(killed.communicate(), 120)
    assert killed.returncode == -signal.SIGKILL, err.decode()
    steps = {r["step"]: r for r in empty_database.rows(
        "SELECT step, position, done_at IS NOT NULL AS done FROM legacy_adoption_steps")}
    assert steps["memories"]["done"] is True
    assert steps["conversations"] == {"step": "conversations", "position": 4, "done": False}
    assert empty_database.rows("SELECT count(*) AS n FROM conversations") == [{"n": 4}]
    assert empty_database.rows("SELECT finished_at FROM legacy_adoption") == [
        {"finished_at": None}]

    client = await start(aiohttp_client, legacy_settings(empty_database))
    assert (await (await client.get("/")).json())["database"] == "ready"
    assert [r["id"] for r in await rows(client, "SELECT id FROM conversations ORDER BY id")
            ] == list(range(1, 16))
    assert len(await rows(client, "SELECT id FROM memories")) == 13
    assert len(await rows(client, "SELECT id FROM token_usage")) == 3
    done = await rows(client, "SELECT step, counts->>'adopted' AS n FROM legacy_adoption_steps"
                              " WHERE step IN ('memories', 'conversations', 'usage')"
                              " ORDER BY step")
    assert done == [{"step": "conversations", "n": "15"}, {"step": "memories", "n": "13"},
                    {"step": "usage", "n": "3"}]


async def test_40_json_text_vectors_kept_for_the_api_model_in_force(
        empty_database: LegacyDatabase, legacy_settings: Any, aiohttp_client: Any,
        embeddings: FakeEmbeddings) -> None:
    build_40(empty_database)
    empty_database.run("UPDATE memories SET embedding_json = '[0.1, broken' WHERE id = 2")
    empty_database.run("UPDATE memories SET embedding_json = '[0.5, 0.5]' WHERE id = 3")
    client = await start(aiohttp_client, legacy_settings(
        empty_database, EMBEDDING_API_KEY="sk-embedding-key-0123456789",
        EMBEDDING_BASE_URL=embeddings.base_url, EMBEDDING_DIM=8))
    kept = await rows(client, "SELECT memory_id, model, dim, embedding FROM memory_embeddings")
    assert [(r["memory_id"], r["model"], r["dim"]) for r in kept] == [
        (1, "text-embedding-3-small", 8)]  # 2 does not parse, 3 has two dimensions
    assert kept[0]["embedding"] == pytest.approx(vector(1), abs=1e-6)
    messages = await rows(client, "SELECT message_id FROM conversation_embeddings")
    assert messages == [{"message_id": 1}]


async def test_the_status_page_says_what_was_adopted(
        empty_database: LegacyDatabase, legacy_settings: Any, aiohttp_client: Any,
        embeddings: FakeEmbeddings) -> None:
    build_41(empty_database, embeddings_url=embeddings.base_url)
    client = await start(aiohttp_client, legacy_settings(
        empty_database, DASHBOARD_PASSWORD=PASSWORD, SESSION_SECRET=SECRET))
    assert (await login(client)).status == 303
    minute = r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}"
    for lang, expected in (
            ("zh", f"Pawwake 4\\.1\\.x（{minute} 导入）：13 条记忆、15 条消息、2 条对话线、"
                   "3 条用量记录、12 项已保存的设置；3 行未能导入，保留在 pawwake4 中"),
            ("en", f"Pawwake 4\\.1\\.x \\(on {minute}\\): 13 memories, 15 messages, 2 threads,"
                   " 3 usage rows, 12 saved settings; 3 rows could not be taken and stay in"
                   " pawwake4")):
        client.session.cookie_jar.update_cookies({"pawwake_lang": lang})
        page = BeautifulSoup(await (await client.get("/dashboard")).text(), "html.parser")
        line = page.select_one('[data-fact="adoption"] dd').get_text(" ", strip=True)
        assert re.match(expected, line), (lang, line)


async def test_a_table_of_another_program_in_the_way_is_named(
        empty_database: LegacyDatabase, legacy_settings: Any, aiohttp_client: Any,
        caplog: pytest.LogCaptureFixture) -> None:
    empty_database.run("CREATE TABLE jobs (id serial PRIMARY KEY, what text)")
    client = await start(aiohttp_client, legacy_settings(empty_database))
    assert (await (await client.get("/")).json())["database"] != "ready"
    assert "TableInTheWay: this database already has tables named jobs that are not" \
           " Pawwake's" in caplog.text
    assert empty_database.rows("SELECT to_regclass('schema_migrations') AS t") == [{"t": None}]


async def test_adopted_memories_are_found_once_the_background_jobs_ran(
        empty_database: LegacyDatabase, legacy_settings: Any, aiohttp_client: Any,
        embeddings: FakeEmbeddings) -> None:
    build_41(empty_database, embeddings_url=embeddings.base_url)
    client = await start(aiohttp_client, legacy_settings(empty_database))
    await services_of(client.server.app).jobs.run_until_idle()
    terms = await rows(client, "SELECT count(*) AS n FROM memories WHERE search_terms = '{}'")
    assert terms == [{"n": 0}]  # the keyword index covers every adopted memory
    vectors = await rows(client, "SELECT count(*) AS n FROM memory_embeddings")
    assert vectors == [{"n": 13}]  # 2 kept, 11 made by the job
    found = await (await client.post("/api/memories/search",
                                     json={"q": "花生过敏", "limit": 3})).json()
    assert found["results"][0]["id"] == 7
