"""Real Pawwake 4.0.x and 4.1.x databases, written with our own SQL from the 4.x schema.

4.x made its tables at start (``CREATE TABLE IF NOT EXISTS``) and grew them column by column;
``SCHEMA_40`` and ``SCHEMA_41`` are the shapes its last 4.0 and 4.1 releases left behind:
``metadata`` and ``summary`` as JSON text, ``merged_from`` as integer[], vectors in a
pgvector ``embedding`` column (or ``embedding_json`` text where pgvector was missing), the
dashboard's settings as text in ``gateway_config``, partition threads in
``session_cache_state`` with their round counter ``a_start_round``.

The data is small and hand-made, so each test can check rows one by one; ``bulk_41`` adds
rows at realistic sizes for the timing figure.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg2
import pytest

from tests.conftest import PostgresHandle

_names = itertools.count(1)
BASE = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
DIM = 8

SCHEMA_40 = """
CREATE TABLE conversations (
    id SERIAL PRIMARY KEY, session_id TEXT NOT NULL, role TEXT NOT NULL, content TEXT,
    model TEXT, created_at TIMESTAMPTZ DEFAULT NOW(), metadata TEXT);
CREATE INDEX idx_conversations_session ON conversations (session_id, created_at);
CREATE TABLE memories (
    id SERIAL PRIMARY KEY, content TEXT NOT NULL, importance INTEGER DEFAULT 5,
    source_session TEXT, created_at TIMESTAMPTZ DEFAULT NOW(),
    last_accessed TIMESTAMPTZ DEFAULT NOW(), layer INTEGER DEFAULT 1, title TEXT DEFAULT NULL,
    is_active BOOLEAN DEFAULT TRUE, merged_from INTEGER[] DEFAULT NULL,
    event_date DATE DEFAULT NULL, embedding_json TEXT);
CREATE INDEX idx_memories_fts ON memories USING gin (to_tsvector('simple', content));
ALTER TABLE conversations ADD COLUMN embedding_json TEXT;
CREATE TABLE gateway_config (key TEXT PRIMARY KEY, value TEXT DEFAULT '');
CREATE TABLE session_cache_state (
    session_id TEXT PRIMARY KEY, summary TEXT DEFAULT '', a_start_round INTEGER DEFAULT 0,
    updated_at TIMESTAMPTZ DEFAULT NOW());
CREATE TABLE token_usage (
    id SERIAL PRIMARY KEY, session_id TEXT, model TEXT, prompt_tokens INTEGER DEFAULT 0,
    completion_tokens INTEGER DEFAULT 0, total_tokens INTEGER DEFAULT 0,
    usage_type TEXT DEFAULT 'chat', created_at TIMESTAMPTZ DEFAULT NOW());
"""

SCHEMA_41 = f"""
CREATE EXTENSION IF NOT EXISTS vector;
CREATE TABLE conversations (
    id SERIAL PRIMARY KEY, session_id TEXT NOT NULL, role TEXT NOT NULL, content TEXT,
    model TEXT, created_at TIMESTAMPTZ DEFAULT NOW(), metadata TEXT,
    deleted_at TIMESTAMPTZ DEFAULT NULL, deletion_scope TEXT DEFAULT NULL,
    content_tsv TSVECTOR, embedding vector({DIM}));
CREATE INDEX idx_conversations_content_tsv ON conversations USING GIN (content_tsv);
CREATE TABLE memories (
    id SERIAL PRIMARY KEY, content TEXT NOT NULL, importance INTEGER DEFAULT 5,
    source_session TEXT, created_at TIMESTAMPTZ DEFAULT NOW(),
    last_accessed TIMESTAMPTZ DEFAULT NOW(), layer INTEGER DEFAULT 1, title TEXT DEFAULT NULL,
    is_active BOOLEAN DEFAULT TRUE, merged_from INTEGER[] DEFAULT NULL,
    event_date DATE DEFAULT NULL, source_message_ids INTEGER[] DEFAULT NULL,
    source_content_intact BOOLEAN DEFAULT FALSE, remind_at TIMESTAMPTZ DEFAULT NULL,
    reminder_claimed_at TIMESTAMPTZ DEFAULT NULL,
    reminder_delivered_at TIMESTAMPTZ DEFAULT NULL, external_id TEXT,
    superseded_by INTEGER, embedding vector({DIM}));
ALTER TABLE memories ADD CONSTRAINT fk_memories_superseded_by
    FOREIGN KEY (superseded_by) REFERENCES memories(id);
CREATE UNIQUE INDEX idx_memories_external_id ON memories (external_id)
    WHERE external_id IS NOT NULL;
CREATE TABLE gateway_config (key TEXT PRIMARY KEY, value TEXT DEFAULT '');
CREATE TABLE session_cache_state (
    session_id TEXT PRIMARY KEY, summary TEXT DEFAULT '', a_start_round INTEGER DEFAULT 0,
    deleted_summary TEXT, deleted_a_start_round INTEGER, deleted_cache_valid BOOLEAN,
    seen_fragment_ids TEXT[] DEFAULT '{{}}', seen_fragment_times JSONB DEFAULT '{{}}'::jsonb,
    seen_memory_times JSONB DEFAULT '{{}}'::jsonb, updated_at TIMESTAMPTZ DEFAULT NOW());
CREATE TABLE token_usage (
    id SERIAL PRIMARY KEY, session_id TEXT, model TEXT, prompt_tokens INTEGER DEFAULT 0,
    completion_tokens INTEGER DEFAULT 0, total_tokens INTEGER DEFAULT 0,
    usage_type TEXT DEFAULT 'chat', created_at TIMESTAMPTZ DEFAULT NOW());
CREATE INDEX idx_token_usage_created ON token_usage (created_at DESC);
"""

GEMINI_CALL = {"id": "call_weather_1", "type": "function",
               "function": {"name": "get_weather", "arguments": "{\"city\": \"杭州\"}"},
               "extra_content": {"google": {"thought_signature": "c2lnbmF0dXJlLTE="}}}
THREAD = "my-thread"
SUMMARY_PART = "早先的摘要：阿狸在准备六月的考试，每天晚上复习到十一点。"
FRAGMENT_ID = "v1:0123456789abcdef0123456789abcdef"


def vector(seed: int) -> list[float]:
    return [round(((seed * 7 + i * 3) % 11) / 10 - 0.5, 3) for i in range(DIM)]


def vector_text(seed: int) -> str:
    return "[" + ",".join(str(x) for x in vector(seed)) + "]"


@dataclass
class LegacyDatabase:
    """A 4.x database on the test server; ``uri`` for the app, ``sql`` for checks."""

    handle: PostgresHandle
    name: str

    @property
    def uri(self) -> str:
        return self.handle.uri(self.name)

    def run(self, sql: str, params: Any = None) -> None:
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute(sql, params)

    def rows(self, sql: str, params: Any = None) -> list[dict[str, Any]]:
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute(sql, params)
            names = [d.name for d in cur.description or ()]
            return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    def connect(self) -> Any:
        conn = psycopg2.connect(self.uri)
        conn.autocommit = True
        return _Closing(conn)


class _Closing:
    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def __enter__(self) -> Any:
        return self.conn

    def __exit__(self, *exc: object) -> None:
        self.conn.close()


@pytest.fixture
def empty_database(postgres: PostgresHandle) -> Iterator[LegacyDatabase]:
    """A database with nothing in it (not the migrated template)."""
    name = f"legacy_{next(_names)}_{id(postgres) % 10000}"
    postgres.admin(f"CREATE DATABASE {name}")
    yield LegacyDatabase(postgres, name)
    postgres.admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def at(minutes: float) -> datetime:
    return BASE + timedelta(minutes=minutes)


def message(db: LegacyDatabase, id_: int, session: str, role: str, content: str | None,
            minute: float, metadata: Any = None, **extra: Any) -> None:
    columns = ["id", "session_id", "role", "content", "model", "created_at", "metadata",
               *extra]
    meta = metadata if isinstance(metadata, str) or metadata is None else json.dumps(
        metadata, ensure_ascii=False)
    values = [id_, session, role, content, "anthropic/claude-sonnet-4", at(minute), meta,
              *extra.values()]
    db.run(f"INSERT INTO conversations ({', '.join(columns)}) VALUES"
           f" ({', '.join(['%s'] * len(values))})", values)


def memory(db: LegacyDatabase, id_: int, content: str, **fields: Any) -> None:
    columns = ["id", "content", *fields]
    db.run(f"INSERT INTO memories ({', '.join(columns)}) VALUES"
           f" ({', '.join(['%s'] * len(columns))})", [id_, content, *fields.values()])


def setting(db: LegacyDatabase, key: str, value: str) -> None:
    db.run("INSERT INTO gateway_config (key, value) VALUES (%s, %s)", (key, value))


def thread_rounds(db: LegacyDatabase, *, embedded: bool) -> None:
    """The partition thread: 5 rounds, the third with a Gemini tool call and reasoning;
    4.x rotated once at X=2 (a_start_round 2) with one summary part."""
    extra = (lambda n: {"embedding": vector_text(n)}) if embedded else (lambda n: {})
    message(db, 1, THREAD, "user", "第一轮：今天好累", 0, **extra(1))
    message(db, 2, THREAD, "assistant", "抱抱你，早点休息", 1, **extra(2))
    message(db, 3, THREAD, "user", "第二轮：明天考数学", 2)
    message(db, 4, THREAD, "assistant", "你准备得很充分", 3)
    message(db, 5, THREAD, "user", "第三轮：杭州明天天气怎么样", 4)
    message(db, 6, THREAD, "assistant", None, 5,
            {"tool_calls": [GEMINI_CALL], "reasoning_content": "先查一下天气"})
    message(db, 7, THREAD, "tool", "杭州明天小雨，18 度", 6, {"tool_call_id": "call_weather_1",
                                                         "name": "get_weather"})
    message(db, 8, THREAD, "assistant", "明天杭州有小雨，记得带伞", 7,
            {"reasoning_content": "天气结果是小雨"})
    message(db, 9, THREAD, "user", "第四轮：谢谢你", 8)
    message(db, 10, THREAD, "assistant", "不客气", 9)
    message(db, 11, THREAD, "user", "第五轮：晚安", 10)
    message(db, 12, THREAD, "assistant", "晚安，好梦", 11)


def build_41(db: LegacyDatabase, *, embeddings_url: str = "http://127.0.0.1:9/v1") -> None:
    """A 4.1.x database: every kind of row adoption must carry (see the test for each)."""
    db.run(SCHEMA_41)
    thread_rounds(db, embedded=True)
    message(db, 13, "chatbox-1", "user", "普通会话的问题", 20)
    message(db, 14, "chatbox-1", "assistant", "普通会话的回答", 21, "{not json")
    message(db, 15, "chatbox-1", "user", "被删掉的一条", 22, None,
            deleted_at=at(30), deletion_scope="message")
    message(db, 16, "chatbox-1", "function", "旧格式的函数结果", 23)
    db.run("SELECT setval('conversations_id_seq', 16)")
    now = datetime.now(UTC)
    memory(db, 1, "阿狸六月要考数学", importance=7, layer=1, source_session=THREAD,
           source_message_ids=[3, 4], embedding=vector_text(101), created_at=at(2))
    memory(db, 2, "周六去西湖野餐", importance=5, layer=1, is_active=False,
           embedding=vector_text(102))
    memory(db, 3, "野餐带了三明治", importance=4, layer=1, is_active=False)
    memory(db, 4, "周末野餐：在西湖边吃三明治", importance=6, layer=2, title="周末野餐",
           merged_from=[2, 3], event_date="2026-05-02")
    memory(db, 5, "住在北京", importance=6, layer=1, is_active=False)
    memory(db, 6, "搬到了上海", importance=6, layer=1)
    db.run("UPDATE memories SET superseded_by = 6 WHERE id = 5")
    memory(db, 7, "阿狸对花生过敏", importance=9, layer=3)
    memory(db, 8, "提醒：五月三日交论文", remind_at=now - timedelta(days=3),
           reminder_delivered_at=now - timedelta(days=2))
    memory(db, 9, "提醒：今晚给妈妈打电话", remind_at=now - timedelta(hours=1),
           reminder_claimed_at=now - timedelta(minutes=1))
    memory(db, 10, "提醒：下周一体检", remind_at=now + timedelta(days=5))
    memory(db, 11, "很早以前的一条记忆", layer=None, importance=None)
    memory(db, 12, "重要程度写错的记忆", importance=0)
    memory(db, 13, "   ")
    memory(db, 14, "日记：五月一日去了图书馆", external_id="diary-2026-05-01")
    db.run("SELECT setval('memories_id_seq', 14)")
    for key, value in (
            ("API_KEY", "sk-or-v1-old-key-0123456789"),
            ("DEFAULT_MODEL", "anthropic/claude-sonnet-4"),
            ("MEMORY_MODEL", "anthropic/claude-haiku-4.5"),
            ("systemPrompt", "你是阿澈，阿狸的伴侣。"),
            ("partition_session_id", THREAD),
            ("CACHE_PARTITION_ENABLED", "true"),
            ("CACHE_PARTITION_X", "2"),
            ("CACHE_SUMMARY_MODEL", ""),
            ("MEMORY_HW_KEYWORD", "0.35"),
            ("MEMORY_HW_SEMANTIC", "0.5"),
            ("MEMORY_VECTOR_ENABLED", "false"),
            ("MEMORY_SEMANTIC_THRESHOLD", "0.7"),
            ("MEMORY_API_KEY", "sk-memory-key"),
            ("MEMORY_SOURCE_DEDUPE_ENABLED", "false"),
            ("MAX_MEMORIES_INJECT", "lots"),
            ("EMBEDDING_API_KEY", "sk-embedding-key-0123456789"),
            ("EMBEDDING_BASE_URL", embeddings_url),
            ("EMBEDDING_MODEL", "text-embedding-3-small"),
            ("EMBEDDING_DIM", str(DIM)),
            ("embedding_vector_source",
             json.dumps([embeddings_url, "text-embedding-3-small", DIM])),
            ("database_instance_id", "5b1e0c4e-8d2f-4a57-9f53-1f2d3c4b5a69")):
        setting(db, key, value)
    db.run("INSERT INTO session_cache_state (session_id, summary, a_start_round,"
           " seen_fragment_times, seen_memory_times, updated_at)"
           " VALUES (%s, %s, 2, %s::jsonb, %s::jsonb, %s)",
           (THREAD, json.dumps([SUMMARY_PART], ensure_ascii=False),
            json.dumps({FRAGMENT_ID: (now - timedelta(hours=1)).isoformat()}),
            json.dumps({"1": (now - timedelta(hours=1)).isoformat(),
                        "999": now.isoformat()}), at(12)))
    db.run("INSERT INTO session_cache_state (session_id, summary, a_start_round)"
           " VALUES ('old-thread', '一段不是 JSON 的旧摘要', 0)")
    for session, model, prompt, completion, kind in (
            (THREAD, "anthropic/claude-sonnet-4", 1200, 300, "chat"),
            (THREAD, "anthropic/claude-haiku-4.5", 800, 200, "summary"),
            ("chatbox-1", "anthropic/claude-sonnet-4", 500, 100, "chat"),
            ("chatbox-1", "x", 1, 1, "mystery")):
        db.run("INSERT INTO token_usage (session_id, model, prompt_tokens, completion_tokens,"
               " total_tokens, usage_type, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s)",
               (session, model, prompt, completion, prompt + completion, kind, at(40)))


def build_40(db: LegacyDatabase) -> None:
    """A 4.0.x database without pgvector: vectors as JSON text, no reminders or chains."""
    db.run(SCHEMA_40)
    thread_rounds(db, embedded=False)
    db.run("UPDATE conversations SET embedding_json = %s WHERE id = 1", (vector_text(1),))
    db.run("SELECT setval('conversations_id_seq', 12)")
    memory(db, 1, "阿狸喜欢橘猫", importance=8, layer=None, embedding_json=vector_text(1))
    memory(db, 2, "第一次见面在咖啡馆", importance=6, layer=1, is_active=False)
    memory(db, 3, "第一次见面那天下雨", importance=5, layer=1, is_active=False)
    memory(db, 4, "初见：雨天的咖啡馆", importance=7, layer=2, title="初见",
           merged_from=[2, 3, 77], event_date="2026-04-01")
    memory(db, 5, "核心：阿狸的生日是三月三日", importance=10, layer=3)
    db.run("SELECT setval('memories_id_seq', 5)")
    for key, value in (("systemPrompt", "你是阿澈。"), ("partition_session_id", THREAD),
                       ("CACHE_PARTITION_X", "2"), ("MEMORY_HW_RECENCY", "0.15")):
        setting(db, key, value)
    db.run("INSERT INTO session_cache_state (session_id, summary, a_start_round, updated_at)"
           " VALUES (%s, %s, 2, %s)", (THREAD, SUMMARY_PART, at(12)))
    db.run("INSERT INTO token_usage (session_id, model, prompt_tokens, completion_tokens,"
           " total_tokens) VALUES (%s, 'm', 10, 5, 15)", (THREAD,))


def bulk_41(db: LegacyDatabase, messages: int, memories: int) -> None:
    """Realistic sizes on top of ``build_41``: threads of 40 messages, every fifth memory
    merged or archived, vectors on every row."""
    db.run(
        "INSERT INTO conversations (id, session_id, role, content, model, created_at, metadata,"
        " embedding)"
        " SELECT 1000 + g, 'bulk-' || (g / 40), CASE WHEN g %% 2 = 0 THEN 'user'"
        "   ELSE 'assistant' END, '批量消息 ' || g || ' 今天去公园散步，看到很多花', 'm',"
        "   %s::timestamptz + g * interval '1 second',"
        "   CASE WHEN g %% 7 = 0 THEN '{\"reasoning_content\": \"想一想\"}' END,"
        "   ('[' || array_to_string(ARRAY(SELECT ((g + i) %% 13) / 13.0 FROM"
        "     generate_series(1, %s) i), ',') || ']')::vector"
        " FROM generate_series(1, %s) g", (BASE, DIM, messages))
    db.run(
        "INSERT INTO memories (id, content, importance, layer, is_active, merged_from,"
        " source_message_ids, embedding, created_at)"
        " SELECT 1000 + g, '批量记忆 ' || g || '：阿狸喜欢在周末去公园', 1 + g %% 10,"
        "   CASE WHEN g %% 5 = 0 THEN 2 ELSE 1 END, g %% 5 <> 1,"
        "   CASE WHEN g %% 5 = 0 THEN ARRAY[1000 + g - 4] END, ARRAY[1000 + g],"
        "   ('[' || array_to_string(ARRAY(SELECT ((g * i) %% 17) / 17.0 FROM"
        "     generate_series(1, %s) i), ',') || ']')::vector,"
        "   %s::timestamptz + g * interval '1 minute'"
        " FROM generate_series(1, %s) g", (DIM, BASE, memories))


def fingerprint(db: LegacyDatabase, schemas: tuple[str, ...] | None = None
                ) -> dict[str, Any]:
    """Every relation, function and extension outside the system schemas, and a digest of
    every table's rows: equal fingerprints mean nothing was changed."""
    system = ("pg_catalog", "information_schema", "pg_toast")
    relations = db.rows(
        "SELECT n.nspname AS schema, c.relname AS name, c.relkind::text AS kind"
        " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname <> ALL(%s) AND n.nspname NOT LIKE 'pg_temp%%'"
        "   AND n.nspname NOT LIKE 'pg_toast_temp%%' ORDER BY 1, 2", (list(system),))
    if schemas is not None:
        relations = [r for r in relations if r["schema"] in schemas]
    digests = {}
    for rel in relations:
        if rel["kind"] == "r":
            name = f'"{rel["schema"]}"."{rel["name"]}"'
            digests[name] = db.rows(f"SELECT md5(coalesce(string_agg(t::text, '|' ORDER BY"
                                    f" t::text), '')) AS d FROM {name} t")[0]["d"]
    functions = db.rows("SELECT n.nspname || '.' || p.proname AS name FROM pg_proc p"
                        " JOIN pg_namespace n ON n.oid = p.pronamespace"
                        " WHERE n.nspname <> ALL(%s) ORDER BY 1", (list(system),))
    if schemas is not None:
        functions = [f for f in functions if f["name"].split(".")[0] in schemas]
    extensions = db.rows("SELECT extname FROM pg_extension ORDER BY 1")
    return {"relations": relations, "rows": digests, "functions": functions,
            "extensions": extensions}
