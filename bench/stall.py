"""Does heavy input stall anyone? Chat TTFT and ``GET /`` latency while big inputs arrive.

    python bench/stall.py [--streams 20] [--before 8] [--settle 4] [--ttft 0.05]

The fake provider of ``bench/overhead.py`` (run as a subprocess) answers every
chat with a fixed time to first token and accepts bodies of any size. The gateway runs as ``python pawwake.py`` with the embedded PostgreSQL in a
temporary data dir, memory on (local embedding model, extraction off: the fake provider is no
memory model) and conversation recall on. ``--streams`` clients stream chats back to back, each
a new conversation with its own message (so every chat searches memory with a new query), and a
probe asks ``GET /`` every 50 ms (and another a static file), each from a process of its own.

Phase "before": that load alone for ``--before`` seconds. Phase "during": the same load while
three heavy inputs are sent at once: a 1 MB memory (``POST /api/memories``), a chat whose
message is 1M characters, and a maximal sidecar turn (``POST /api/conversations/turn``: 200
messages, as large as the request limit allows). An input refused with 413 is fine (a limit
did its job); the script then sends the largest size that is accepted, halving until one is,
so the heavy path is still exercised. Every body it may send is built before the phase
starts (building the 27 MB one on the client's own loop stalled the probes for a second, which
read as the gateway's stall); the report also gives the client's own loop lag per phase. The
phase lasts until the three are answered plus
``--settle`` seconds of the background work they cause (indexing, embedding).

Then SIGTERM is sent while a memory backfill embeds and chats stream, and the time to exit is
printed. Targets: TTFT p99 during at most 2x before, ``GET /`` p99 under 100 ms, exit within
10 s plus the streams' grace (SHUTDOWN_GRACE_SECONDS: short streams finish well inside it).
Never run by the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

import overhead  # noqa: E402

sys.path.insert(0, str(ROOT))
from pawwake.memory.fields import MAX_CONTENT_CHARS  # noqa: E402
from pawwake.settings import BY_NAME  # noqa: E402

KEY = overhead.GATEWAY_KEY
HEADERS = {"X-Gateway-Key": KEY, "Content-Type": "application/json"}
WORDS = ("今天 我们 公园 散步 火锅 电影 回家 睡觉 明天 上班 小猫 咖啡 朋友 周末 旅行 下雨 "
         "医生 牙疼 生日 蛋糕 音乐 跑步 书店 地铁 老师 考试 学校 花园 晚饭 早餐").split()
SIDECAR_MESSAGES = 200
SIDECAR_MESSAGE_CHARS = 45_000  # 200 of these are about 27 MB, under the default 32 MB limit
MEMORY_BYTES = 1024 * 1024
STATIC = "/static/css/dashboard.css"
CHAT_CHARS = 1_000_000


def chinese(chars: int, seed: int) -> str:
    rng = random.Random(seed)
    parts: list[str] = []
    size = 0
    while size < chars:
        word = rng.choice(WORDS)
        parts.append(word)
        size += len(word)
        if rng.random() < 0.1:
            parts.append("。")
            size += 1
    return "".join(parts)[:chars]


def pct(values: list[float], share: float) -> float:
    return overhead.percentile(values, share) * 1000 if values else float("nan")


class LoopLag:
    """The client's own event-loop lag (a 10 ms sleep that overshoots), so a stall of the
    client is not mistaken for one of the gateway."""

    def __init__(self) -> None:
        self.worst = 0.0
        self._stop = asyncio.Event()

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._stop.is_set():
            started = loop.time()
            await asyncio.sleep(0.01)
            self.worst = max(self.worst, loop.time() - started - 0.01)

    def stop(self) -> None:
        self._stop.set()


class Load:
    """``streams`` clients chatting back to back, and a ``GET /`` probe every 50 ms."""

    def __init__(self, session: aiohttp.ClientSession, base: str, streams: int) -> None:
        self.session, self.base, self.streams = session, base, streams
        self.ttft: list[float] = []
        self.health: list[float] = []
        self.static: list[float] = []  # a static file: no database, the event loop alone
        self.errors = 0
        self._stop = asyncio.Event()
        self._count = 0
        self.lag = LoopLag()

    def body(self) -> bytes:
        self._count += 1
        rng = random.Random(self._count)
        text = f"第{self._count}次：" + "".join(rng.choice(WORDS) for _ in range(12)) + "？"
        return json.dumps({"model": "bench/model", "stream": True,
                           "messages": [{"role": "user", "content": text}]},
                          ensure_ascii=False).encode()

    async def chat(self) -> None:
        while not self._stop.is_set():
            started = time.perf_counter()
            try:
                async with self.session.post(self.base + "/v1/chat/completions",
                                             data=self.body(), headers=HEADERS) as resp:
                    if resp.status != 200:
                        self.errors += 1
                        await resp.read()
                        continue
                    await resp.content.readany()
                    self.ttft.append(time.perf_counter() - started)
                    while await resp.content.readany():
                        pass
            except (aiohttp.ClientError, OSError):
                self.errors += 1

    async def probe(self, path: str, into: list[float]) -> None:
        """``GET path`` every 50 ms from a process of its own (``--probe``): on this
        process's loop, busy with 20 streams, a probe's answer waited for the client too."""
        probe = await asyncio.create_subprocess_exec(
            sys.executable, __file__, "--probe", self.base + path,
            stdout=asyncio.subprocess.PIPE)
        assert probe.stdout is not None
        reading = asyncio.create_task(self._samples(probe.stdout, into))
        await self._stop.wait()
        probe.terminate()
        await probe.wait()
        await reading

    async def _samples(self, stream: asyncio.StreamReader, into: list[float]) -> None:
        async for line in stream:
            if line.strip() == b"error":
                self.errors += 1
            elif line.strip():
                into.append(float(line))

    async def run_until(self, done: asyncio.Future[Any] | None, seconds: float) -> None:
        workers = [asyncio.create_task(self.chat()) for _ in range(self.streams)]
        workers.append(asyncio.create_task(self.probe("/", self.health)))
        workers.append(asyncio.create_task(self.probe(STATIC, self.static)))
        lagging = asyncio.create_task(self.lag.run())
        if done is not None:
            await done
        await asyncio.sleep(seconds)
        self._stop.set()
        await asyncio.gather(*workers)
        self.lag.stop()
        await lagging


async def post_body(session: aiohttp.ClientSession, url: str, data: bytes
                    ) -> tuple[int, float, str]:
    started = time.perf_counter()
    async with session.post(url, data=data, headers=HEADERS) as resp:
        text = await resp.text()
        return resp.status, time.perf_counter() - started, text[:200]


async def post_json(session: aiohttp.ClientSession, url: str, payload: Any
                    ) -> tuple[int, float, str]:
    return await post_body(session, url, json.dumps(payload, ensure_ascii=False).encode())


def sizes_tried(size: int, floor: int, limit: int | None) -> list[int]:
    """The sizes ``largest_accepted`` may send, in order: ``size``, then ``limit`` (the largest
    size the gateway documents) when ``size`` is over it, then halving down to ``floor``."""
    tried = [size]
    while size > floor:
        size = limit if limit is not None and size > limit else size // 2
        tried.append(size)
    return tried


async def largest_accepted(send: Any, sizes: list[int], label: str) -> str:
    """Send at each size of ``sizes`` until one is not refused as too large (413, or 400 for a
    field over its limit). Returns a line for the report."""
    refused = []
    for size in sizes:
        status, seconds, text = await send(size)
        if status not in (400, 413) or size == sizes[-1]:
            break
        refused.append(f"{size}: {status}")
    note = f" (refused {', '.join(refused)})" if refused else ""
    return f"{label}: size {size} -> HTTP {status} in {seconds:.2f} s{note}" + (
        "" if status < 400 else f" {text}")


HeavyBodies = dict[str, tuple[str, str, dict[int, bytes]]]  # name: (label, path, size: body)


def heavy_bodies(inputs: list[str]) -> HeavyBodies:
    """Every body the heavy inputs may send, built before the load starts: making a 27 MB
    body takes the client's own event loop about a second, and the probes (on that loop)
    would have counted it as the gateway's stall."""

    def memory(size: int) -> Any:
        return {"content": chinese(size // 3, 7)}

    def chat(size: int) -> Any:
        return {"model": "bench/model", "stream": True,
                "messages": [{"role": "user", "content": chinese(size, 8) + "。我刚才说了什么？"}]}

    def sidecar(size: int) -> Any:
        messages = [{"role": "user" if n % 2 == 0 else "assistant",
                     "content": chinese(size, 100 + n)} for n in range(SIDECAR_MESSAGES)]
        return {"turn_id": f"bench-{size}-{time.time_ns()}", "session_id": "bench-sidecar",
                "source": "bench", "messages": messages, "extract_memories": False}

    plans = {
        "memory": ("1 MB memory", "/api/memories", memory,
                   sizes_tried(MEMORY_BYTES, 1000, MAX_CONTENT_CHARS * 3)),
        "chat": ("1M-character chat (TTFT)", "/v1/chat/completions", chat,
                 sizes_tried(CHAT_CHARS, 1000, None)),
        "sidecar": (f"sidecar turn, {SIDECAR_MESSAGES} messages of", "/api/conversations/turn",
                    sidecar, sizes_tried(SIDECAR_MESSAGE_CHARS, 100, None)),
    }
    return {name: (label, path, {size: json.dumps(build(size), ensure_ascii=False).encode()
                                 for size in sizes})
            for name, (label, path, build, sizes) in plans.items() if name in inputs}


async def heavy_inputs(session: aiohttp.ClientSession, base: str, bodies: HeavyBodies
                       ) -> list[str]:
    async def chat(size: int) -> tuple[int, float, str]:
        started = time.perf_counter()
        async with session.post(base + "/v1/chat/completions", data=bodies["chat"][2][size],
                                headers=HEADERS) as resp:
            first = time.perf_counter() - started
            text = (await resp.read()).decode(errors="replace")
            return resp.status, first, text[:200]

    def poster(name: str) -> Any:
        _label, path, by_size = bodies[name]

        async def send(size: int) -> tuple[int, float, str]:
            return await post_body(session, base + path, by_size[size])
        return chat if name == "chat" else send

    return list(await asyncio.gather(*(
        largest_accepted(poster(name), list(by_size), label)
        for name, (label, _path, by_size) in bodies.items())))


async def seed_memories(session: aiohttp.ClientSession, base: str, count: int) -> None:
    for number in range(count):
        text = f"记忆{number}：" + "".join(random.Random(number).choice(WORDS) for _ in range(8))
        status, _seconds, body = await post_json(session, base + "/api/memories",
                                                 {"content": text})
        if status not in (200, 201):
            raise RuntimeError(f"memory seed answered {status}: {body}")


async def measure(base: str, args: argparse.Namespace) -> dict[str, Any]:
    await overhead.wait_until_up(base + "/")
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=600)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        await seed_memories(session, base, 50)
        warm = Load(session, base, args.streams)
        await warm.run_until(None, 3.0)
        before = Load(session, base, args.streams)
        await before.run_until(None, args.before)
        bodies = heavy_bodies(args.inputs)
        during = Load(session, base, args.streams)
        heavy = asyncio.ensure_future(heavy_inputs(session, base, bodies))
        started = time.perf_counter()
        await during.run_until(heavy, args.settle)
        heavy_seconds = time.perf_counter() - started - args.settle
    return {"before": before, "during": during, "heavy": heavy.result(),
            "heavy_seconds": heavy_seconds}


async def shutdown_time(base: str, process: subprocess.Popen[bytes]) -> float:
    """SIGTERM while a backfill embeds and chats stream; seconds until the process ends."""
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
        for number in range(40):
            await post_json(session, base + "/api/memories",
                            {"content": f"{number} " + chinese(700, 300 + number)})
        await asyncio.sleep(1.0)
        load = Load(session, base, 20)
        workers = [asyncio.create_task(load.chat()) for _ in range(20)]
        await asyncio.sleep(1.0)
        started = time.perf_counter()
        process.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            await asyncio.to_thread(process.wait, 60)
        seconds = time.perf_counter() - started
        load._stop.set()
        for worker in workers:
            worker.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
    return seconds


def gateway_env(upstream_port: int, data_dir: Path) -> dict[str, str]:
    env = overhead.gateway_env(upstream_port, "persist", data_dir)
    env.update({"MEMORY_ENABLED": "true", "MEMORY_EXTRACT_INTERVAL": "0",
                "EMBEDDING_PROVIDER": "local", "CONVERSATION_RECALL_ENABLED": "true",
                "XDG_RUNTIME_DIR": str(data_dir / "run")})
    (data_dir / "run").mkdir(parents=True, exist_ok=True)
    return env


def report(result: dict[str, Any], exit_seconds: float, exit_code: int | None,
           args: argparse.Namespace) -> None:
    before, during = result["before"], result["during"]
    lines = [
        f"\n{args.streams} streaming chats, fake provider TTFT {args.ttft * 1000:.0f} ms; "
        f"{os.cpu_count()} CPUs",
        *(f"  {line}" for line in result["heavy"]),
        f"  heavy inputs answered within {result['heavy_seconds']:.1f} s,"
        f" then {args.settle:.0f} s of their background work",
        "",
        f"{'':<10}{'chats':>8}{'TTFT p50':>12}{'TTFT p99':>12}{'GET / p50':>12}"
        f"{'GET / p99':>12}{'max GET /':>12}{'static p99':>12}{'errors':>8}",
    ]
    for name, load in (("before", before), ("during", during)):
        lines.append(
            f"{name:<10}{len(load.ttft):>8}{pct(load.ttft, 0.5):>10.1f}ms"
            f"{pct(load.ttft, 0.99):>10.1f}ms{pct(load.health, 0.5):>10.1f}ms"
            f"{pct(load.health, 0.99):>10.1f}ms{pct(load.health, 1.0):>10.1f}ms"
            f"{pct(load.static, 0.99):>10.1f}ms{load.errors:>8}{load.lag.worst * 1000:>10.1f}ms")
    ratio = pct(during.ttft, 0.99) / pct(before.ttft, 0.99)
    health = pct(during.health, 0.99)
    exit_bound = 10 + BY_NAME["SHUTDOWN_GRACE_SECONDS"].default
    lines += [
        "",
        f"TTFT p99 during / before: {ratio:.2f}x (target <= 2x) "
        f"{'ok' if ratio <= 2 else 'MISSED'}",
        f"GET / p99 during: {health:.1f} ms (target < 100 ms) "
        f"{'ok' if health < 100 else 'MISSED'}",
        f"SIGTERM with a backfill embedding and 20 streams: exit code {exit_code} after "
        f"{exit_seconds:.1f} s (target <= {exit_bound:g} s) "
        f"{'ok' if exit_seconds <= exit_bound else 'MISSED'}",
        f"median TTFT before {statistics.median(before.ttft) * 1000:.1f} ms",
        "client lag: the most the chat client's own event loop fell behind (its TTFTs count"
        " it; the GET probes run in their own processes); bodies are built before the load",
    ]
    sys.stdout.write("\n".join(lines) + "\n")


def main(args: argparse.Namespace) -> None:
    upstream_port, port = overhead.free_port(), overhead.free_port()
    upstream = subprocess.Popen([sys.executable, overhead.__file__, "--serve-upstream",
                                 str(upstream_port), "--ttft", str(args.ttft), "--chunks",
                                 str(args.chunks), "--cadence", str(args.cadence)])
    data_dir = Path(tempfile.mkdtemp(prefix="pawwake-bench-stall-"))
    gateway = None
    try:
        asyncio.run(overhead.wait_until_up(f"http://127.0.0.1:{upstream_port}/v1/models"))
        with (data_dir / "gateway.log").open("wb") as log_file:
            profile = ["-m", "cProfile", "-o", str(args.profile)] if args.profile else []
            gateway = subprocess.Popen(
                [sys.executable, *profile, "pawwake.py", "--host", "127.0.0.1", "--port",
                 str(port)],
                cwd=ROOT, stdout=log_file, stderr=subprocess.STDOUT,
                env=gateway_env(upstream_port, data_dir))
        base = f"http://127.0.0.1:{port}"
        result = asyncio.run(measure(base, args))
        exit_seconds = asyncio.run(shutdown_time(base, gateway))
        report(result, exit_seconds, gateway.poll(), args)
        if args.keep_log:
            shutil.copy(data_dir / "gateway.log", args.keep_log)
    finally:
        if gateway is not None:
            overhead.stop(gateway)
        overhead.stop(upstream)
        with contextlib.suppress(OSError):
            shutil.rmtree(data_dir, ignore_errors=True)


def probe_main(url: str) -> None:
    """``--probe URL``: print the seconds each ``GET URL`` took, every 50 ms, until killed."""

    async def run() -> None:
        async with aiohttp.ClientSession() as session:
            while True:
                started = time.perf_counter()
                try:
                    async with session.get(url) as resp:
                        await resp.read()
                    line = f"{time.perf_counter() - started:.6f}"
                except (aiohttp.ClientError, OSError):
                    line = "error"
                sys.stdout.write(line + "\n")
                sys.stdout.flush()
                await asyncio.sleep(0.05)

    with contextlib.suppress(KeyboardInterrupt, BrokenPipeError):
        asyncio.run(run())


if __name__ == "__main__":
    if sys.argv[1:2] == ["--probe"]:
        probe_main(sys.argv[2])
        sys.exit(0)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=20)
    parser.add_argument("--before", type=float, default=8.0, help="seconds of load alone")
    parser.add_argument("--settle", type=float, default=4.0,
                        help="seconds of load after the heavy inputs were answered")
    parser.add_argument("--ttft", type=float, default=0.05)
    parser.add_argument("--chunks", type=int, default=20)
    parser.add_argument("--cadence", type=float, default=0.02)
    parser.add_argument("--inputs", type=lambda v: v.split(","),
                        default=["memory", "chat", "sidecar"],
                        help="heavy inputs to send: memory, chat, sidecar")
    parser.add_argument("--profile", type=Path, default=None,
                        help="run the gateway under cProfile, writing the stats here")
    parser.add_argument("--keep-log", type=Path, default=None,
                        help="copy the gateway's log here")
    main(parser.parse_args())
