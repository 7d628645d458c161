"""Resident memory of the gateway after large chats: does it come back down?

    python bench/large_bodies.py [--chats 6] [--mb 31] [--env NAME=VALUE ...]

A real gateway process (``pawwake.py``, embedded PostgreSQL in a temporary folder) and the
fake provider of bench/overhead.py on loopback. After start-up, ``--chats`` streamed chats of
``--mb`` MB each (one message, ASCII words: under MAX_REQUEST_MB) are sent one after another,
each in its own session, and stored. Printed: VmRSS idle, after each chat, and every 10 s for
a minute afterwards. ``--env`` adds variables to the gateway's environment (for instance
``MEMORY_ENABLED=false`` for the relay and store alone). Never run by the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import overhead  # noqa: E402
from bench.overhead import free_port, gateway_env, stop, wait_until_up  # noqa: E402

WORDS = "the quick brown fox jumps over the lazy dog and the cat likes fish".split()


def rss_mb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) // 1024
    return -1


async def measure(base: str, pid: int, args: argparse.Namespace) -> None:
    rng = random.Random(1)
    await asyncio.sleep(3)
    print(f"idle                {rss_mb(pid):>5} MB", flush=True)
    size = args.mb * 1_000_000
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) as session:
        for number in range(args.chats):
            text = " ".join(rng.choice(WORDS) for _ in range(size // 4))[:size - 200]
            body = json.dumps({"model": "bench/model", "stream": True, "messages": [
                {"role": "user", "content": f"chat {number} {text}"}]})
            del text
            started = time.perf_counter()
            async with session.post(base + "/v1/chat/completions", data=body, headers={
                    "X-Gateway-Key": overhead.GATEWAY_KEY, "Content-Type": "application/json",
                    "X-Session-Id": f"large-{number}"}) as response:
                await response.read()
                status = response.status
            del body
            print(f"chat {number} ({status}, {time.perf_counter() - started:.1f} s) "
                  f"{rss_mb(pid):>5} MB", flush=True)
    for tick in range(1, 7):
        await asyncio.sleep(10)
        print(f"{tick * 10:>3} s after         {rss_mb(pid):>5} MB", flush=True)


def main(args: argparse.Namespace) -> None:
    upstream_port, port = free_port(), free_port()
    upstream = subprocess.Popen([sys.executable, overhead.__file__, "--serve-upstream",
                                 str(upstream_port), "--ttft", "0.01", "--chunks", "5",
                                 "--cadence", "0.001"])
    data_dir = Path(tempfile.mkdtemp(prefix="pawwake-bench-large-"))
    env = gateway_env(upstream_port, "persist", data_dir)
    env.update({"MEMORY_ENABLED": "true", "XDG_RUNTIME_DIR": str(data_dir / "run")})
    env.update(dict(item.split("=", 1) for item in args.env))
    (data_dir / "run").mkdir()
    with (data_dir / "gateway.log").open("wb") as log_file:
        gateway = subprocess.Popen([sys.executable, "pawwake.py", "--host", "127.0.0.1",
                                    "--port", str(port)], cwd=ROOT, env=env,
                                   stdout=log_file, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        asyncio.run(wait_until_up(f"http://127.0.0.1:{upstream_port}/v1/models"))
        asyncio.run(wait_until_up(base + "/"))
        asyncio.run(measure(base, gateway.pid, args))
    finally:
        stop(gateway)
        stop(upstream)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=int, default=6)
    parser.add_argument("--mb", type=int, default=31)
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE")
    main(parser.parse_args())
