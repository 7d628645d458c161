"""Resident memory of the gateway with memory on: idle, after one search, after many searches.

    python bench/memory_rss.py [--runs 3] [--searches 100] [--chats 1000] [--env NAME=VALUE ...]
    python bench/memory_rss.py --speed      # hot-path timings in this process instead

The gateway runs as ``python pawwake.py --port N`` in a subprocess (like bench/overhead.py),
with the embedded PostgreSQL in a temporary data dir, MEMORY_ENABLED=true and the bundled local
embedding model. It gets a few memories over the API (the embedding worker embeds them), then
searches. Reported per run: VmRSS with its anonymous and file-backed parts (the model file is
memory-mapped: its pages are clean page cache the kernel can drop), idle after start-up, after
the first search and after ``--searches`` varied searches, plus the median search time.
``--env`` adds variables to the gateway's environment (e.g. ``--env MALLOC_ARENA_MAX=2``) to
compare settings. ``--speed`` times jieba cutting and local query embedding in-process.
Never run by the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import overhead  # noqa: E402
from overhead import free_port, stop  # noqa: E402

from pawwake.settings import SETTINGS  # noqa: E402

GATEWAY_KEY = "bench-gateway-key-0123456789"
MEMORIES = [
    "用户养了一只橘猫，名字叫馒头，三岁了。",
    "用户下周二要去看牙医，之前补过两颗牙。",
    "The user is learning Rust and prefers short code examples.",
    "用户喜欢在周末去爬山，最近一次去了香山。",
    "用户对花生过敏，点外卖时要提醒。",
    "The user's sister lives in Berlin and works as a nurse.",
    "用户在准备雅思考试，目标是七分。",
    "用户最喜欢的电影是《千与千寻》。",
]
QUERY_WORDS = ["猫", "牙医", "爬山", "过敏", "电影", "考试", "Rust", "sister", "周末", "外卖",
               "名字", "香山", "Berlin", "nurse", "火锅", "工作", "天气", "音乐", "旅行", "生日"]


def memory_mb(pid: int) -> dict[str, float]:
    """VmRSS and its RssAnon/RssFile parts, in MB."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name in ("VmRSS", "RssAnon", "RssFile", "Threads"):
            values[name] = int(rest.split()[0]) / (1 if name == "Threads" else 1024)
    return values


def gateway_env(data_dir: Path, extra: dict[str, str], upstream_port: int | None = None
                ) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {s.name for s in SETTINGS}}
    env.update({
        "API_BASE_URL": f"http://127.0.0.1:{upstream_port or free_port()}/v1",
        "API_KEY": "sk-bench-unused",
        "DEFAULT_MODEL": "bench/model", "GATEWAY_SECRET": GATEWAY_KEY, "LOG_LEVEL": "INFO",
        "PAWWAKE_DATA_DIR": str(data_dir), "DATABASE_ENABLED": "true", "MEMORY_ENABLED": "true",
        "MEMORY_VECTOR_ENABLED": "true", "EMBEDDING_PROVIDER": "local",
    })
    env.update(extra)
    return env


async def wait_until_up(url: str, process: subprocess.Popen[bytes]) -> None:
    async with asyncio.timeout(120), aiohttp.ClientSession() as session:
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the gateway exited with {process.returncode}")
            with contextlib.suppress(aiohttp.ClientError, OSError):
                async with session.get(url) as response:
                    if response.status < 500:
                        return
            await asyncio.sleep(0.1)


async def search(session: aiohttp.ClientSession, base: str, query: str) -> float:
    started = time.perf_counter()
    async with session.post(f"{base}/api/memories/search", json={"q": query}) as response:
        body = await response.json()
        if response.status != 200:
            raise RuntimeError(f"search answered {response.status}: {body}")
    return time.perf_counter() - started


class ChatPayloads:
    """Streaming chat bodies, each a new conversation with a different short user message."""

    def __init__(self) -> None:
        self._count = 0

    def next(self) -> bytes:
        self._count += 1
        words = [QUERY_WORDS[(self._count * 3 + k) % len(QUERY_WORDS)] for k in range(4)]
        return json.dumps({"model": "bench/model", "stream": True, "messages": [
            {"role": "user", "content": f"{' '.join(words)} 怎么样？第{self._count}次"}]},
            ensure_ascii=False).encode()


async def chat_many(base: str, count: int, concurrency: int = 10) -> None:
    """``count`` streamed chats through the gateway (memory recall on each), 10 at a time."""
    payloads = ChatPayloads()
    headers = {"Content-Type": "application/json", "X-Gateway-Key": GATEWAY_KEY}
    remaining = count

    async def client(session: aiohttp.ClientSession) -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await overhead.one_stream(session, f"{base}/v1/chat/completions", headers,
                                      payloads)

    async with aiohttp.ClientSession() as session:
        await asyncio.gather(*(client(session) for _ in range(concurrency)))


async def measure(pid: int, port: int, process: subprocess.Popen[bytes], searches: int,
                  chats: int = 0) -> dict[str, Any]:
    base = f"http://127.0.0.1:{port}"
    await wait_until_up(f"{base}/", process)
    await asyncio.sleep(3.0)  # start-up work running in the background settles
    result: dict[str, Any] = {"idle": memory_mb(pid)}
    headers = {"X-Gateway-Key": GATEWAY_KEY}
    async with aiohttp.ClientSession(headers=headers) as session:
        for content in MEMORIES:
            async with session.post(f"{base}/api/memories", json={"content": content}) as resp:
                if resp.status not in (200, 201):
                    raise RuntimeError(f"create answered {resp.status}: {await resp.text()}")
        await asyncio.sleep(3.0)  # the embedding worker embeds the new memories
        result["memories"] = memory_mb(pid)
        first = await search(session, base, "我的猫叫什么名字")
        await asyncio.sleep(0.5)
        result["first_search"] = memory_mb(pid)
        times = [first]
        for number in range(searches):
            words = [QUERY_WORDS[(number * 7 + k) % len(QUERY_WORDS)] for k in range(3)]
            times.append(await search(session, base, f"{' '.join(words)} 第{number}次"))
        await asyncio.sleep(0.5)
        result["searches"] = memory_mb(pid)
    if chats:
        await chat_many(base, chats)
        await asyncio.sleep(3.0)  # after-reply writes and turn storing settle
        result["chats"] = memory_mb(pid)
    result["first_ms"] = first * 1000
    result["median_ms"] = statistics.median(times[1:] or times) * 1000
    return result


def run_once(extra: dict[str, str], searches: int, chats: int = 0) -> dict[str, Any]:
    data_dir = Path(tempfile.mkdtemp(prefix="pawwake-bench-rss-"))
    port = free_port()
    upstream = None
    upstream_port = None
    if chats:  # the fake provider of bench/overhead.py answers the chats
        upstream_port = free_port()
        upstream = subprocess.Popen([sys.executable, overhead.__file__, "--serve-upstream",
                                     str(upstream_port)])
    try:
        with (data_dir / "gateway.log").open("wb") as log_file:
            gateway = subprocess.Popen(
                [sys.executable, "pawwake.py", "--host", "127.0.0.1", "--port", str(port)],
                cwd=ROOT, stdout=log_file, stderr=subprocess.STDOUT,
                env=gateway_env(data_dir, extra, upstream_port))
        try:
            return asyncio.run(measure(gateway.pid, port, gateway, searches, chats))
        finally:
            stop(gateway)
    finally:
        if upstream is not None:
            stop(upstream)
        shutil.rmtree(data_dir, ignore_errors=True)


def cell(values: dict[str, float]) -> str:
    return (f"{values['VmRSS']:6.1f} MB (anon {values['RssAnon']:5.1f}, "
            f"file {values['RssFile']:5.1f}, {values['Threads']:.0f} threads)")


def report(results: list[dict[str, Any]], args: argparse.Namespace) -> None:
    sys.stdout.write(f"\nenv: {' '.join(args.env) or '(default)'}; {os.cpu_count()} CPUs\n")
    for number, r in enumerate(results, 1):
        sys.stdout.write(
            f"run {number}: idle {cell(r['idle'])}\n"
            f"       after {len(MEMORIES)} memories  {cell(r['memories'])}\n"
            f"       after 1st search  {cell(r['first_search'])}  ({r['first_ms']:.0f} ms)\n"
            f"       after {args.searches} searches {cell(r['searches'])}  "
            f"(median {r['median_ms']:.1f} ms)\n"
            + (f"       after {args.chats} chats   {cell(r['chats'])}\n" if "chats" in r else ""))
    for stage in ("idle", "first_search", "searches", "chats")[:4 if args.chats else 3]:
        values = [r[stage]["VmRSS"] for r in results]
        sys.stdout.write(f"{stage:<14} VmRSS median {statistics.median(values):6.1f} MB "
                         f"(min {min(values):.1f}, max {max(values):.1f})\n")


# ---- hot-path timings (in this process) -----------------------------------------------------

def speed(rounds: int) -> None:
    """Median time of jieba cutting (index terms, query keywords) and of one local query
    embedding, in this process, so changes to how they are held can be checked for cost."""
    from pawwake.llm.embeddings.local_engine import load_e5
    from pawwake.text import tokens

    data_dir = tempfile.mkdtemp(prefix="pawwake-bench-speed-")
    try:
        started = time.perf_counter()
        tokens.load(data_dir)
        load_s = time.perf_counter() - started
        text = (Path(ROOT / "system_prompt.txt").read_text(encoding="utf-8")
                + "".join(MEMORIES) * 3)
        cut: list[float] = []
        keywords: list[float] = []
        for number in range(rounds):
            started = time.perf_counter()
            tokens.index_terms(text)
            cut.append(time.perf_counter() - started)
            started = time.perf_counter()
            tokens.query_keywords(f"{text[:300]} {number}")  # a new text: no cache hit
            keywords.append(time.perf_counter() - started)
        model = load_e5()
        model.query("预热")
        embed: list[float] = []
        for number in range(rounds):
            query = f"{QUERY_WORDS[number % len(QUERY_WORDS)]} 第{number}次 我的猫叫什么名字"
            started = time.perf_counter()
            model.query(query)
            embed.append(time.perf_counter() - started)
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    sys.stdout.write(
        f"tokenizer load {load_s:.2f} s; index_terms of {len(text)} chars: median "
        f"{statistics.median(cut) * 1000:.2f} ms ({len(text) / statistics.median(cut) / 1000:.0f}"
        f" kchars/s); query_keywords of 300 chars: median "
        f"{statistics.median(keywords) * 1000:.2f} ms; local query embedding: median "
        f"{statistics.median(embed) * 1000:.2f} ms; VmRSS {memory_mb(os.getpid())['VmRSS']:.1f}"
        f" MB\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--searches", type=int, default=100)
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--chats", type=int, default=0,
                        help="then this many streamed chats (fake provider), 10 at a time")
    parser.add_argument("--speed", action="store_true", help="time the hot path in-process")
    parser.add_argument("--rounds", type=int, default=200, help="rounds for --speed")
    args = parser.parse_args()
    if args.speed:
        speed(args.rounds)
        return
    extra = dict(item.split("=", 1) for item in args.env)
    results = [run_once(extra, args.searches, args.chats) for _ in range(args.runs)]
    report(results, args)


if __name__ == "__main__":
    main()
