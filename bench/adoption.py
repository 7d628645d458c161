"""Adopting a Pawwake 4.1.x database at realistic sizes, on the embedded PostgreSQL.

    python bench/adoption.py [--messages 50000] [--memories 5000] [--runs 3]

Builds the 4.1.x test database (``tests/legacy_fixtures.py``) plus ``--messages`` messages and
``--memories`` memories, every one with an 8-dimension pgvector vector, then times per run:
the dry run's survey, the migration that moves the tables aside, and the adoption itself
(kept vectors included). The baseline is the floor of any copy: ``CREATE TABLE ... AS
SELECT *`` of the same source tables in one statement each. Prints the load average beside
the figures; on a shared machine compare the ratio, not the seconds. Never run by the suite.
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.mkdtemp(prefix="pawwake-bench-run-"))

import psycopg2

from pawwake.db.embedded import start_embedded, stop_embedded
from pawwake.db.legacy import helpers
from pawwake.db.legacy.schema import find_legacy
from pawwake.db.migrate import migrate
from pawwake.db.pool import create_pool, cursor, transaction
from pawwake.settings import Settings
from pawwake.upgrade.adopt import finish_adoption
from pawwake.upgrade.survey import make_plan, survey
from tests.legacy_fixtures import LegacyDatabase, build_41, bulk_41


class Server:
    def __init__(self, server: object) -> None:
        self.server = server

    def uri(self, name: str = "postgres") -> str:
        return self.server.get_uri(name)  # type: ignore[attr-defined]

    def admin(self, sql: str) -> None:
        conn = psycopg2.connect(self.uri())
        conn.autocommit = True
        try:
            conn.cursor().execute(sql)
        finally:
            conn.close()


async def one_run(handle: Server, name: str, messages: int, memories: int
                  ) -> dict[str, float]:
    handle.admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    handle.admin(f"CREATE DATABASE {name}")
    db = LegacyDatabase(handle, name)  # type: ignore[arg-type]
    build_41(db)
    bulk_41(db, messages, memories)
    db.run("ANALYZE")
    settings = Settings.from_env({}, DATABASE_URL=db.uri, EMBEDDING_API_KEY="sk-bench",
                                 EMBEDDING_DIM=8)
    pool = await create_pool(db.uri, maxsize=2)
    figures: dict[str, float] = {}
    try:
        started = time.perf_counter()
        db.run("CREATE TABLE copy_floor_m AS SELECT * FROM memories;"
               " CREATE TABLE copy_floor_c AS SELECT * FROM conversations")
        figures["baseline"] = time.perf_counter() - started
        db.run("DROP TABLE copy_floor_m, copy_floor_c")
        async with cursor(pool) as cur:
            await cur.execute("BEGIN")
            started = time.perf_counter()
            await helpers.prepare(cur)
            legacy = await find_legacy(cur)
            assert legacy is not None
            await survey(cur, legacy, await make_plan(cur, legacy, settings))
            figures["dry_run"] = time.perf_counter() - started
            await cur.execute("ROLLBACK")
        started = time.perf_counter()
        async with transaction(pool) as cur:
            await migrate(cur)
        figures["move_aside"] = time.perf_counter() - started
        started = time.perf_counter()
        counts = await finish_adoption(pool, settings)
        figures["adoption"] = time.perf_counter() - started
        assert counts is not None
        assert counts["conversations"]["adopted"] == messages + 15
        assert counts["memories_vectors"]["adopted"] == memories + 2
    finally:
        pool.close()
        await pool.wait_closed()
        handle.admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--memories", type=int, default=5_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="pawwake-bench-adoption-"))
    server = start_embedded(work / "pg")
    handle = Server(server)
    try:
        runs = [asyncio.run(one_run(handle, f"adopt_{n}", args.messages, args.memories))
                for n in range(args.runs)]
    finally:
        stop_embedded(server)
    load = os.getloadavg()
    print(f"{args.messages} messages, {args.memories} memories, vectors on every row;"
          f" load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    for key in ("baseline", "dry_run", "move_aside", "adoption"):
        values = [run[key] for run in runs]
        print(f"  {key:<11} median {statistics.median(values):6.2f} s"
              f"  (runs: {', '.join(f'{v:.2f}' for v in values)})")
    ratio = statistics.median(r["adoption"] / r["baseline"] for r in runs)
    print(f"  adoption / baseline: {ratio:.1f}x")


if __name__ == "__main__":
    main()
