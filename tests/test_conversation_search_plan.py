"""The conversation list search reads each stored message a bounded number of times, whatever
plan PostgreSQL picks: one long thread (partition mode keeps one) of 10,000 messages.

A search that looked for matching sessions with ``session_id IN (SELECT ... WHERE match)``
let the planner choose a semi-join that evaluates the match over the whole session again for
every message of it: 8,000 messages of 1 KB kept PostgreSQL busy for minutes. Here the
planner's other choices are switched off one by one, to show that no plan of the query can
do that; the work is counted from ``EXPLAIN ANALYZE`` (rows each scan of ``conversations``
read, times its loops), never timed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from pawwake.db import conversation_admin, message_vectors
from pawwake.db.pool import Cursor, create_pool, cursor, execute
from pawwake.services import services_of

MESSAGES = 10_000
SESSION = "default"
# Planner choices that keep the old query linear on data like this; without them it went
# quadratic (a nested-loop semi-join over the session's index, the match re-evaluated).
PLANNER_KNOBS = ("hashagg", "hashjoin", "material", "mergejoin", "sort")
# A search statement may read each message for the match, for the aggregation of its session
# and for the page's preview: a quadratic plan reads thousands of times as many.
LINEAR_READS = 3 * MESSAGES


class Explaining:
    """A cursor that runs every statement under EXPLAIN ANALYZE first and keeps the plans."""

    def __init__(self, cur: Cursor) -> None:
        self.cur = cur
        self.plans: list[dict[str, Any]] = []

    async def execute(self, sql: str, params: Any = None) -> None:
        await self.cur.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)
        self.plans.append((await self.cur.fetchone())[0][0]["Plan"])
        await self.cur.execute(sql, params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cur, name)


def nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", ()):
        yield from nodes(child)


def message_reads(plan: dict[str, Any]) -> int:
    """Rows every scan of ``conversations`` looked at (kept or filtered out), over its loops."""
    return sum(int((node["Actual Rows"] + node.get("Rows Removed by Filter", 0)
                    + node.get("Rows Removed by Index Recheck", 0)) * node["Actual Loops"])
               for node in nodes(plan) if node.get("Relation Name") == "conversations")


@pytest.fixture
async def long_thread(make_client: Any) -> Any:
    """One session of MESSAGES messages of about 1 KB, indexed for recall, analysed."""
    client = await make_client(JOB_WORKERS=0, CONVERSATION_RECALL_ENABLED=True)
    pool = services_of(client.server.app).database.pool
    text = ("We talked about the cat, the weather and the garden again today. " * 16)[:1000]
    async with cursor(pool) as cur:
        await execute(cur, "INSERT INTO conversations (session_id, role, content, created_at,"
                           " search_terms)"
                           " SELECT %s, CASE WHEN g %% 2 = 0 THEN 'user' ELSE 'assistant' END,"
                           " %s || ' ' || g, now() - make_interval(secs => %s - g),"
                           " ARRAY['cat', 'weather', 'garden']"
                           " FROM generate_series(1, %s) g",
                      (SESSION, text, MESSAGES, MESSAGES))
        await execute(cur, "ANALYZE conversations")
    return client


async def explained_search(client: Any, query: str, knobs: tuple[str, ...]
                           ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The API's answer to ``?q=query`` and the plans the search ran, on a connection with the
    planner ``knobs`` switched off."""
    app = client.server.app
    dsn = services_of(app).database.pool._dsn  # a pool of the test's own
    pool = await create_pool(dsn, maxsize=1)
    try:
        async with cursor(pool) as cur:
            await cur.execute("SET statement_timeout = '60s'")  # a quadratic plan fails, in time
            for knob in knobs:
                await cur.execute(f"SET enable_{knob} = off")
            explaining = Explaining(cur)
            for terms in (None, [query]):  # a scan of the text; the recall index first
                await conversation_admin.list_sessions(
                    explaining, trash=False, limit=20, offset=0,  # type: ignore[arg-type]
                    phrases=query.split(), terms=terms)
    finally:
        pool.close()
        await pool.wait_closed()
    response = await client.get("/api/conversations", params={"q": query})
    assert response.status == 200, await response.text()
    return await response.json(), explaining.plans


@pytest.mark.parametrize("knobs", [(), PLANNER_KNOBS], ids=["default plan", "nested loops"])
@pytest.mark.parametrize(("query", "found"), [("zzzz", 0), ("garden", 1)])
async def test_a_search_reads_each_message_a_bounded_number_of_times(
        long_thread: Any, knobs: tuple[str, ...], query: str, found: int) -> None:
    page, plans = await explained_search(long_thread, query, knobs)
    assert page["total"] == found
    assert [item["message_count"] for item in page["items"]] == [MESSAGES] * found
    reads = [message_reads(plan) for plan in plans]
    assert len(reads) == 2 and all(0 < n <= LINEAR_READS for n in reads), \
        f"{reads} message reads for {MESSAGES} messages"


def vector_reads(plan: dict[str, Any]) -> int:
    """Rows every scan of ``conversation_embeddings`` looked at, over its loops."""
    return sum(int((node["Actual Rows"] + node.get("Rows Removed by Filter", 0))
                   * node["Actual Loops"])
               for node in nodes(plan) if node.get("Relation Name") == "conversation_embeddings")


async def test_recall_reads_the_vectors_of_its_candidates_only(make_client: Any) -> None:
    """The statement that gives recall's candidates their dot products (pgvector) reads each
    candidate's vector by key: as a plain join the planner hashed the candidates and read
    every vector of the table past them (at about 1,000 messages, the size recall's latency
    target is set at: a thousand vector rows of 1.5 KB for 150 candidates)."""
    client = await make_client(JOB_WORKERS=0, CONVERSATION_RECALL_ENABLED=True)
    database = services_of(client.server.app).database
    assert database is not None
    if not database.pgvector:
        pytest.skip("pgvector is not installed")
    total, dim = 1000, 384
    source = type("Source", (), {"provider": "local", "model": "m", "dim": dim})()
    async with cursor(database.pool) as cur:
        await execute(cur, "INSERT INTO conversations (session_id, role, content, created_at)"
                           " SELECT 's' || (g / 30), 'user', 'line ' || g,"
                           " now() - make_interval(secs => %s - g)"
                           " FROM generate_series(1, %s) g", (total, total))
        await execute(cur, "INSERT INTO conversation_embeddings (message_id, provider, model,"
                           " dim, content_sha, embedding)"
                           " SELECT c.id, 'local', 'm', %s,"
                           " encode(sha256(convert_to(c.content, 'UTF8')), 'hex'),"
                           " array_fill((1.0 / sqrt(%s))::real, ARRAY[%s])"
                           " FROM conversations c", (dim, dim, dim))
        await execute(cur, "ANALYZE conversations; ANALYZE conversation_embeddings")
        await cur.execute("SELECT id FROM conversations ORDER BY id DESC LIMIT 150")
        ids = [int(row[0]) for row in await cur.fetchall()]
        explaining = Explaining(cur)
        vector = np.full(dim, 1.0 / np.sqrt(dim), dtype=np.float32)
        rows = await message_vectors.candidate_facts(
            explaining, ids, provenance=source, vectors=[vector, vector],  # type: ignore[arg-type]
            adjacent_best=60)
    assert len(rows) == len(ids) and all(row["dots"] is not None for row in rows)
    reads = vector_reads(explaining.plans[0])
    assert reads <= 2 * len(ids), f"{reads} vector rows read for {len(ids)} candidates"
