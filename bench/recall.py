"""Conversation recall and sidecar ingest speed (standalone; not run by pytest).

Builds a throwaway embedded PostgreSQL and fills ``conversations`` with sessions of 20
messages whose text is made of real dictionary words (Zipf-distributed) with real index terms,
plus synthetic 384-dim vectors labelled as the local model's (generated inside the database;
a few planted near each query so semantic candidates exist). Then it times
``search_fragments`` in keyword and hybrid mode at each size, and the rate of
``POST /api/conversations/turn`` over loopback HTTP with one writer and with 20 concurrent
writers. The query embedding is cached before timing (it is measured apart).

    python bench/recall.py [--sizes 10000,100000] [--runs 200] [--turns 400] [--steps]
                           [--backend auto|pgvector|numpy]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.memory_search import TextMaker, pct, vocabulary
from bench.throwaway_postgres import throwaway_postgres
from pawwake.app import create_app
from pawwake.conversations.manage import list_conversations
from pawwake.db import fragments as fragments_db
from pawwake.db import memory_embeddings as vectors_db
from pawwake.db import message_vectors
from pawwake.db.pool import connection, cursor
from pawwake.llm.embeddings import LOCAL_DIM
from pawwake.recall.search import search_fragments
from pawwake.services import services_of
from pawwake.settings import Settings
from pawwake.text import tokens

log = logging.getLogger("bench")
SESSION_LENGTH = 20
QUERIES = 40
PLANTED = 10
CHUNK = 1000
KEY = "bench-gateway-key-0123456789abcdef"


async def bulk_insert(pool: Any, maker: TextMaker, start: int, count: int) -> None:
    """Insert ``count`` messages (sessions of SESSION_LENGTH, alternating roles, spread over
    two years) with their index terms."""
    for first in range(start, start + count, CHUNK):
        n = min(CHUNK, start + count - first)
        params: list[Any] = []
        for i in range(first, first + n):
            text = maker.text()
            params += [f"bench-{i // SESSION_LENGTH:06d}", "user" if i % 2 == 0 else "assistant",
                       text, float(i), tokens.index_terms(text)]
        values = ",".join(["(%s, %s, %s, now() - interval '730 days'"
                           " + make_interval(secs => %s * 600), %s)"] * n)
        async with cursor(pool) as cur:
            await cur.execute("INSERT INTO conversations (session_id, role, content, created_at,"
                              f" search_terms) VALUES {values}", params)


async def fill_vectors(pool: Any, provenance: Any) -> None:
    """Random vectors for every message lacking one, made inside the database (fast)."""
    async with cursor(pool) as cur:
        await cur.execute(
            "INSERT INTO conversation_embeddings (message_id, provider, model, dim, content_sha,"
            " embedding) SELECT c.id, %s, %s, %s,"
            " encode(sha256(convert_to(c.content, 'UTF8')), 'hex'),"
            " ARRAY(SELECT (random() - 0.5 + 0 * c.id)::real FROM generate_series(1, %s))"
            " FROM conversations c WHERE NOT EXISTS (SELECT 1 FROM conversation_embeddings e"
            " WHERE e.message_id = c.id)",
            (provenance.provider, provenance.model, int(provenance.dim), int(provenance.dim)),
            timeout=1800)


async def plant_near(pool: Any, provenance: Any, query_vectors: list[np.ndarray],
                     rng: np.random.Generator) -> None:
    async with cursor(pool) as cur:
        await cur.execute("SELECT id, content FROM conversations ORDER BY random() LIMIT %s",
                          (PLANTED * len(query_vectors),))
        rows = await cur.fetchall()
    planted = []
    for i, (rid, content) in enumerate(rows):
        v = query_vectors[i // PLANTED] + rng.standard_normal(LOCAL_DIM).astype(np.float32) * .02
        planted.append((rid, fragments_db.content_sha(content), v / np.linalg.norm(v)))
    async with cursor(pool) as cur:
        await message_vectors.store_vectors(cur, provenance, planted)


async def time_search(app: web.Application, queries: list[str], runs: int, mode: str
                      ) -> tuple[float, float, float]:
    settings = await services_of(app).config.fresh()
    for q in queries:  # warm: query vectors cached
        await search_fragments(services_of(app).recall, q, mode=mode, settings=settings)
    times, found = [], 0
    for i in range(runs):
        started = time.perf_counter()
        outcome = await search_fragments(services_of(app).recall, queries[i % len(queries)], mode=mode,
                                         settings=settings)
        times.append((time.perf_counter() - started) * 1000)
        found += len(outcome.fragments)
        assert outcome.mode == mode, (outcome.mode, outcome.warning)
    return pct(times, 50), pct(times, 95), found / runs


async def time_steps(app: web.Application, queries: list[str], vectors: list[np.ndarray],
                     provenance: Any, runs: int) -> dict[str, tuple[float, float]]:
    """p50/p95 of each database step of a fragment search, to show where the time goes."""
    database = services_of(app).database
    pool = database.pool
    settings = await services_of(app).config.fresh()
    steps: dict[str, list[float]] = {}

    async def timed(name: str, call: Any) -> Any:
        started = time.perf_counter()
        result = await call
        steps.setdefault(name, []).append((time.perf_counter() - started) * 1000)
        return result

    for i in range(runs):
        words = tokens.query_keywords(queries[i % len(queries)])
        stats = services_of(app).recall.term_stats
        plan = await timed("term_statistics", stats.plan(pool, words))
        estimated = stats.estimated(words)
        async with cursor(pool) as cur:
            await timed("term_counts", fragments_db.term_counts(
                cur, [w for w in words if w not in estimated]))
            await timed("keyword_matches", fragments_db.keyword_matches(
                cur, words, [], 1000, windowed=plan.windowed, window=plan.window,
                gather_cap=plan.gather_cap))
        await timed("nearest_messages", services_of(app).recall_vectors.nearest(
            pool, provenance, vectors[i % len(vectors)], 100, [],
            pgvector=await services_of(app).vectors.choose(
                settings, database, provenance, message_vectors.MESSAGE_VECTORS) == "pgvector"))
    return {name: (pct(v, 50), pct(v, 95)) for name, v in steps.items()}


async def explain_nearest(app: web.Application, provenance: Any, vector: np.ndarray) -> None:
    """Log the nearest-message query's plan (it should walk the HNSW index)."""
    database = services_of(app).database
    settings = await services_of(app).config.fresh()
    if await services_of(app).vectors.choose(settings, database, provenance,
                                             message_vectors.MESSAGE_VECTORS) != "pgvector":
        return
    pool = database.pool
    params = message_vectors.nearest_params(provenance, vector, 100, [])
    async with cursor(pool) as cur:
        await cur.execute("SET hnsw.ef_search = %(ef)s; SET hnsw.iterative_scan = relaxed_order;"
                          " EXPLAIN (ANALYZE, COSTS OFF) " + message_vectors.nearest_sql(provenance),
                          params)
        plan = "\n".join(row[0] for row in await cur.fetchall())
    log.info("  nearest-message plan:\n%s", plan)


async def time_listing(app: web.Application, queries: list[str], runs: int, phrase: bool
                       ) -> tuple[float, float]:
    """The conversations page's list: the newest page, or sessions containing a phrase."""
    times = []
    for i in range(runs):
        query = queries[i % len(queries)].split()[0] if phrase else ""
        started = time.perf_counter()
        await list_conversations(services_of(app).recall, query=query, limit=20,
                                 settings=services_of(app).config.current())
        times.append((time.perf_counter() - started) * 1000)
    return pct(times, 50), pct(times, 95)


def turn_body(writer: int, number: int, maker: TextMaker) -> dict[str, Any]:
    return {"turn_id": f"t-{number}", "session_id": f"ingest-{writer}", "source": "bench",
            "messages": [{"role": "user", "content": maker.text()},
                         {"role": "assistant", "content": maker.text()}]}


async def ingest_rate(base: str, maker: TextMaker, turns: int, writers: int) -> float:
    """Turns per second with ``writers`` concurrent clients, each on its own session."""
    headers = {"X-Gateway-Key": KEY}
    per_writer = max(1, turns // writers)
    bodies = [[turn_body(w + 1000 * writers, n, maker) for n in range(per_writer)]
              for w in range(writers)]
    async with aiohttp.ClientSession() as http:
        async def write(batch: list[dict[str, Any]]) -> None:
            for body in batch:
                async with http.post(base + "/api/conversations/turn", json=body,
                                     headers=headers) as resp:
                    assert resp.status == 201, await resp.text()
        started = time.perf_counter()
        await asyncio.gather(*(write(batch) for batch in bodies))
        elapsed = time.perf_counter() - started
    return writers * per_writer / elapsed


async def run(app: web.Application, base: str, sizes: list[int], runs: int, turns: int,
              steps: bool) -> None:
    pool = services_of(app).database.pool
    rng = np.random.default_rng(5)
    maker = TextMaker(vocabulary())
    settings = await services_of(app).config.fresh()
    embedder = services_of(app).embedder
    provenance = await embedder.provenance(settings)
    queries = [maker.query() for _ in range(QUERIES)]
    query_vectors = [(await embedder.embed_query(settings, q))[0] for q in queries]
    log.info("pgvector %s, VECTOR_BACKEND %s", services_of(app).database.pgvector,
             settings["VECTOR_BACKEND"])
    index_name = vectors_db.hnsw_index_name(provenance, "conversation_embeddings")
    have = 0
    for size in sizes:
        started = time.perf_counter()
        async with cursor(pool) as cur:  # bulk loads are faster without the HNSW index
            await cur.execute(f"DROP INDEX IF EXISTS {index_name}")
        await bulk_insert(pool, maker, have, size - have)
        have = size
        await fill_vectors(pool, provenance)
        await plant_near(pool, provenance, query_vectors, rng)
        async with connection(pool) as conn, conn.cursor() as cur:  # no statement bound
            await cur.execute("VACUUM ANALYZE conversations", timeout=600)
            await cur.execute("VACUUM ANALYZE conversation_embeddings", timeout=600)
        loaded = time.perf_counter() - started
        started = time.perf_counter()
        if services_of(app).database.pgvector and settings["VECTOR_BACKEND"] != "numpy":
            async with connection(pool) as conn, conn.cursor() as cur:
                await vectors_db.create_hnsw_index(cur, provenance, memory_mb=512,
                                                   table="conversation_embeddings")
        log.info("== %s messages (load %.1f s, vector index %.1f s)", size, loaded,
                 time.perf_counter() - started)
        await explain_nearest(app, provenance, query_vectors[0])
        for mode in ("keyword", "hybrid"):
            p50, p95, found = await time_search(app, queries, runs, mode)
            log.info("fragment search %-7s p50 %7.2f ms  p95 %7.2f ms  (%.1f fragments/query)",
                     mode, p50, p95, found)
        if steps:
            for name, (p50, p95) in (await time_steps(
                    app, queries, query_vectors, provenance, max(20, runs // 4))).items():
                log.info("  step %-17s p50 %7.2f ms  p95 %7.2f ms", name, p50, p95)
        for label, phrase in (("newest", False), ("by phrase", True)):
            p50, p95 = await time_listing(app, queries, max(20, runs // 4), phrase)
            log.info("conversation list %-9s p50 %7.2f ms  p95 %7.2f ms", label, p50, p95)
    for writers in (1, 20):
        rate = await ingest_rate(base, maker, turns, writers)
        log.info("sidecar ingest, %2d writer(s): %.0f turns/s", writers, rate)


async def main(sizes: list[int], runs: int, turns: int, steps: bool, backend: str) -> None:
    with throwaway_postgres("pawwake-bench-recall-") as (server, workdir):
        settings = Settings.from_env(
            {}, DATABASE_URL=server.get_uri(), JOB_WORKERS=0, GATEWAY_SECRET=KEY,
            PAWWAKE_DATA_DIR=str(workdir / "data"), EMBEDDING_PROVIDER="local",
            MEMORY_ENABLED=False, CONVERSATION_RECALL_ENABLED=True, VECTOR_BACKEND=backend,
            QUERY_EMBEDDING_TIMEOUT=60, QUERY_EMBEDDING_MAX_WAIT=0)  # busy machines: wait
        app = create_app(settings)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        try:
            await run(app, f"http://127.0.0.1:{port}", sizes, runs, turns, steps)
        finally:
            await runner.cleanup()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--turns", type=int, default=400)
    parser.add_argument("--steps", action="store_true", help="time each database step too")
    parser.add_argument("--backend", default="auto", choices=("auto", "pgvector", "numpy"),
                        help="VECTOR_BACKEND of the gateway under test")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    for noisy in ("pawwake", "aiohttp"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    asyncio.run(main(sorted(int(s) for s in args.sizes.split(",")), args.runs, args.turns,
                     args.steps, args.backend))
