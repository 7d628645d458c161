"""Conversation list search on one long thread: is it linear in the thread's length?

    python bench/conversation_search.py [--sizes 10000,100000] [--runs 3]

An embedded PostgreSQL in a temporary folder; for each size, one session (partition mode
keeps one thread) of that many messages of about 1 KB, indexed for recall, then ANALYZE. The
search is the one ``GET /api/conversations?q=`` runs (``db/conversation_admin.list_sessions``,
through the gateway's own pool, under the request's statement bound), for a word no message
holds (``zzzz``) and one every message holds (``garden``), by text scan and through the
recall index, with the planner as it is and with its hash, sort and materialise choices off
(the shape of plan that went quadratic). Printed per case: median seconds of ``--runs``, and
the rows every scan of ``conversations`` read (EXPLAIN ANALYZE), per message. A statement over
60 s is stopped and printed as such. Never run by the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.mkdtemp(prefix="pawwake-bench-run-"))

from bench.throwaway_postgres import throwaway_postgres  # noqa: E402
from pawwake.db import conversation_admin  # noqa: E402
from pawwake.db.migrate import migrate  # noqa: E402
from pawwake.db.pool import create_pool, cursor, transaction  # noqa: E402
from pawwake.db.statement_bounds import statements_bounded  # noqa: E402

KNOBS = ("hashagg", "hashjoin", "material", "mergejoin", "sort")
TEXT = ("We talked about the cat, the weather and the garden again today. " * 16)[:1000]
STOP_SECONDS = 60


class Explaining:
    """Runs each statement under EXPLAIN ANALYZE and keeps the rows its scans read."""

    def __init__(self, cur: Any) -> None:
        self.cur = cur
        self.reads = 0

    async def execute(self, sql: str, params: Any = None) -> None:
        await self.cur.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)
        self.reads += reads_of((await self.cur.fetchone())[0][0]["Plan"])
        await self.cur.execute(sql, params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cur, name)


def reads_of(plan: dict[str, Any]) -> int:
    own = 0
    if plan.get("Relation Name") == "conversations":
        own = int((plan["Actual Rows"] + plan.get("Rows Removed by Filter", 0))
                  * plan["Actual Loops"])
    return own + sum(reads_of(child) for child in plan.get("Plans", ()))


async def fill(pool: Any, size: int) -> None:
    async with cursor(pool) as cur:
        await cur.execute("TRUNCATE conversations CASCADE")
        await cur.execute(
            "INSERT INTO conversations (session_id, role, content, created_at, search_terms)"
            " SELECT 'default', CASE WHEN g %% 2 = 0 THEN 'user' ELSE 'assistant' END,"
            " %s || ' ' || g, now() - make_interval(secs => %s - g),"
            " ARRAY['cat', 'weather', 'garden'] FROM generate_series(1, %s) g",
            (TEXT, size, size))
        await cur.execute("ANALYZE conversations")


async def search(pool: Any, query: str, terms: list[str] | None, knobs: tuple[str, ...],
                 runs: int) -> tuple[float | None, int]:
    """(median seconds or None when stopped, rows read by the last run)."""
    async with cursor(pool) as cur:  # the pool holds one connection: the knobs stay on it
        for knob in KNOBS:
            await cur.execute(f"SET enable_{knob} = {'off' if knob in knobs else 'on'}")
    seconds: list[float] = []
    explaining = None
    try:
        for _ in range(runs):
            started = time.perf_counter()
            async with cursor(pool) as cur:
                await conversation_admin.list_sessions(cur, trash=False, limit=20, offset=0,
                                                       phrases=[query], terms=terms)
            seconds.append(time.perf_counter() - started)
        async with cursor(pool) as cur:
            explaining = Explaining(cur)
            await conversation_admin.list_sessions(explaining, trash=False, limit=20,
                                                   offset=0, phrases=[query], terms=terms)
    except Exception as exc:  # stopped at its bound (the old query's quadratic plan)
        print(f"    stopped: {type(exc).__name__}", flush=True)
        return None, 0
    return statistics.median(seconds), explaining.reads


async def main(args: argparse.Namespace) -> None:
    with throwaway_postgres("pawwake-bench-search-", "pg") as (server, _folder):
        pool = await create_pool(server.get_uri(), maxsize=1)
        async with transaction(pool) as cur:
            await migrate(cur)
        print(f"{'messages':>9} {'query':<7} {'path':<6} {'planner':<12}{'median s':>9}"
              f"{'reads/msg':>10}   load average {os.getloadavg()[0]:.2f}")
        for size in (int(n) for n in args.sizes.split(",")):
            await fill(pool, size)
            for query in ("zzzz", "garden"):
                for path, terms in (("scan", None), ("index", [query])):
                    for planner, knobs in (("default", ()), ("no hash/sort", KNOBS)):
                        with statements_bounded(STOP_SECONDS):
                            median, reads = await search(pool, query, terms, knobs, args.runs)
                        timing = f"{median:9.3f}" if median is not None else f"{'>60':>9}"
                        print(f"{size:>9} {query:<7} {path:<6} {planner:<12}{timing}"
                              f"{reads / size:>10.1f}", flush=True)
        print(f"load average after: {os.getloadavg()[0]:.2f}")
        pool.close()
        await pool.wait_closed()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--runs", type=int, default=3)
    asyncio.run(main(parser.parse_args()))
