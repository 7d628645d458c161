"""A transaction costs no round trip of its own: BEGIN and its bounds go with its first
statement, and a deferred write with the next statement or the COMMIT. It stays all or
nothing, also when the statement that fails is the first one or a deferred one."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import psycopg2
import pytest

from pawwake.db.pool import create_pool, cursor, deferred, fetch_one, transaction


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[Any]:
    # One connection: what a transaction leaves behind, the next one meets.
    made = await create_pool(database_url, maxsize=1)
    async with cursor(made) as cur:
        await cur.execute("CREATE TEMP TABLE IF NOT EXISTS notes (n int)")
    yield made
    made.close()
    await made.wait_closed()


SENT = "SELECT query FROM pg_stat_activity WHERE pid = pg_backend_pid()"


async def test_begin_travels_with_the_first_statement_only(pool: Any) -> None:
    async with transaction(pool) as cur:
        first = await fetch_one(cur, SENT)
        await cur.execute("SELECT pg_stat_clear_snapshot()")  # the view is read once per block
        second = await fetch_one(cur, SENT)
        in_block = await fetch_one(cur, "SELECT now() = statement_timestamp() AS same")
    assert first is not None and second is not None and in_block is not None
    assert first["query"].startswith("BEGIN; SET LOCAL statement_timeout")
    assert second["query"] == SENT
    assert in_block["same"] is False  # the statements share the transaction's start time


async def test_a_failure_after_the_first_statement_rolls_everything_back(pool: Any) -> None:
    with pytest.raises(RuntimeError):
        async with transaction(pool) as cur:
            await cur.execute("INSERT INTO notes VALUES (1)")
            await cur.execute("INSERT INTO notes VALUES (2)")
            raise RuntimeError("the caller gives up")
    async with cursor(pool) as cur:
        assert await fetch_one(cur, "SELECT count(*) AS n FROM notes") == {"n": 0}


async def test_a_failing_first_statement_leaves_the_connection_clean(pool: Any) -> None:
    with pytest.raises(psycopg2.errors.UndefinedTable):
        async with transaction(pool) as cur:
            await cur.execute("INSERT INTO no_such_table VALUES (1)")
    async with transaction(pool) as cur:  # the same connection, not stuck in an aborted block
        await cur.execute("INSERT INTO notes VALUES (3)")
    async with cursor(pool) as cur:
        assert await fetch_one(cur, "SELECT count(*) AS n FROM notes") == {"n": 1}
        assert await fetch_one(cur, "SELECT pg_current_xact_id_if_assigned() IS NULL AS idle"
                               ) == {"idle": True}


async def test_a_transaction_that_ran_nothing_leaves_no_open_block(pool: Any) -> None:
    async with transaction(pool):
        pass
    async with transaction(pool) as cur:
        await cur.execute("INSERT INTO notes VALUES (4)")
    async with cursor(pool) as cur:
        assert await fetch_one(cur, "SELECT count(*) AS n FROM notes") == {"n": 1}


async def test_a_deferred_write_goes_with_the_next_statement(pool: Any) -> None:
    async with transaction(pool) as cur:
        await deferred(cur, "INSERT INTO notes VALUES (%s)", (5,))
        sent = await fetch_one(cur, SENT)
        await deferred(cur, "INSERT INTO notes VALUES (%s)", (6,))  # goes with the COMMIT
    assert sent is not None
    assert "INSERT INTO notes VALUES (5); SELECT query" in sent["query"]
    async with cursor(pool) as cur:
        assert await fetch_one(cur, "SELECT array_agg(n ORDER BY n) AS n FROM notes") == {
            "n": [5, 6]}


async def test_a_deferred_value_with_a_percent_sign_goes_ahead_of_a_formatted_query(
        pool: Any) -> None:
    async with transaction(pool) as cur:
        await cur.execute("CREATE TEMP TABLE IF NOT EXISTS said (t text)")
        await deferred(cur, "INSERT INTO said VALUES (%s)", ("100%s %(x)s 50%",))
        found = await fetch_one(cur, "SELECT count(*) AS n FROM said WHERE t LIKE %s",
                                ("100%",))
    assert found == {"n": 1}


async def test_a_failing_deferred_write_fails_the_whole_transaction(pool: Any) -> None:
    with pytest.raises(psycopg2.errors.InvalidTextRepresentation):
        async with transaction(pool) as cur:
            await cur.execute("INSERT INTO notes VALUES (7)")
            await deferred(cur, "INSERT INTO notes VALUES (%s::int)", ("seven",))
    async with cursor(pool) as cur:
        assert await fetch_one(cur, "SELECT count(*) AS n FROM notes") == {"n": 0}
        assert await fetch_one(cur, "SELECT pg_current_xact_id_if_assigned() IS NULL AS idle"
                               ) == {"idle": True}


async def test_a_deferred_write_outside_a_transaction_runs_at_once(pool: Any) -> None:
    async with cursor(pool) as cur:
        await deferred(cur, "INSERT INTO notes VALUES (%s)", (8,))
    async with cursor(pool) as cur:
        assert await fetch_one(cur, "SELECT count(*) AS n FROM notes") == {"n": 1}
