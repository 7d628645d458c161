"""What one streamed chat request runs before its first byte goes upstream.

    python bench/chat_path.py [--recall] [--list]

The gateway runs in this process (embedded PostgreSQL in a temporary data dir, partition mode
and keyword memory on, ``--recall`` adds conversation recall) in front of a fake provider in
this process too. After a warm-up turn, one streamed request is traced from the moment it
arrives until the provider receives it. Reported: the modules of ours whose code ran (any
thread) and the SQL statements sent (``--list`` prints both). Never run by the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

import aiohttp
import aiopg
from aiohttp import web

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pawwake.app import create_app  # noqa: E402
from pawwake.db.embedded import start_embedded, stop_embedded  # noqa: E402
from pawwake.db.migrate import migrate  # noqa: E402
from pawwake.db.pool import create_pool, transaction  # noqa: E402
from pawwake.settings import Settings  # noqa: E402
from pawwake.text import tokens  # noqa: E402

GATEWAY_KEY = "bench-gateway-key-0123456789"
MEMORY = "用户的猫叫小橘"


class Trace:
    """Our modules whose functions ran, and the SQL sent, while ``on``."""

    def __init__(self) -> None:
        self.on = False
        self.modules: set[str] = set()
        self.statements: list[str] = []

    def profile(self, frame: FrameType, event: str, _arg: Any) -> None:
        if self.on and event == "call":
            name = frame.f_globals.get("__name__", "")
            if name == "pawwake" or name.startswith("pawwake."):
                self.modules.add(name)


def count_sql(trace: Trace) -> None:
    """Every statement goes through aiopg's Cursor.execute: note it while tracing."""
    original = aiopg.Cursor.execute

    async def execute(self: Any, operation: str, parameters: Any = None, *args: Any,
                      **kwargs: Any) -> Any:
        if trace.on:
            trace.statements.append(" ".join(str(operation).split())[:100])
        return await original(self, operation, parameters, *args, **kwargs)

    aiopg.Cursor.execute = execute  # type: ignore[method-assign]


def upstream_app(trace: Trace) -> web.Application:
    async def chat(request: web.Request) -> web.StreamResponse:
        trace.on = False  # the request reached the provider: the first byte went upstream
        await request.read()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for delta, finish in (({"role": "assistant", "content": "好的"}, None), ({}, "stop")):
            chunk = {"id": "c", "object": "chat.completion.chunk", "model": "bench/model",
                     "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            await response.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    return app


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def run(uri: str, data_dir: Path, recall: bool) -> Trace:
    trace = Trace()
    count_sql(trace)
    tokens.load()
    pool = await create_pool(uri, maxsize=1)
    try:
        async with transaction(pool) as cur:
            await migrate(cur)
        async with transaction(pool) as cur:
            await cur.execute("INSERT INTO memories (content, importance, search_terms)"
                              " VALUES (%s, 8, %s)", (MEMORY, tokens.index_terms(MEMORY)))
    finally:
        pool.close()
        await pool.wait_closed()
    upstream_runner = web.AppRunner(upstream_app(trace))
    await upstream_runner.setup()
    upstream_port = free_port()
    await web.TCPSite(upstream_runner, "127.0.0.1", upstream_port).start()
    settings = Settings.from_env(
        {}, DATABASE_URL=uri, API_BASE_URL=f"http://127.0.0.1:{upstream_port}/v1",
        API_KEY="sk-bench", DEFAULT_MODEL="bench/model", GATEWAY_SECRET=GATEWAY_KEY,
        PAWWAKE_DATA_DIR=str(data_dir / "data"), CACHE_PARTITION_ENABLED=True,
        MEMORY_ENABLED=True, MEMORY_VECTOR_ENABLED=False, CONVERSATION_RECALL_ENABLED=recall,
        JOB_WORKERS=0, MEMORY_EXTRACT_INTERVAL=0)
    runner = web.AppRunner(create_app(settings))
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    headers = {"Authorization": f"Bearer {GATEWAY_KEY}"}
    try:
        async with aiohttp.ClientSession() as session:
            for n, text in enumerate(("小橘今天吃饭了吗", "小橘最近胃口不好怎么办")):
                body = {"stream": True, "messages": [{"role": "user", "content": text}]}
                if n == 1:
                    await asyncio.sleep(0.5)  # the warm-up turn's after-reply work is done
                    threading.setprofile(trace.profile)
                    sys.setprofile(trace.profile)
                    trace.on = True
                async with session.post(url, json=body, headers=headers) as response:
                    assert response.status == 200, await response.text()
                    await response.read()
                sys.setprofile(None)
                threading.setprofile(None)  # type: ignore[arg-type]
                trace.on = False
    finally:
        await runner.cleanup()
        await upstream_runner.cleanup()
    return trace


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recall", action="store_true", help="conversation recall on too")
    parser.add_argument("--list", action="store_true", help="print the modules and statements")
    args = parser.parse_args()
    os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.mkdtemp(prefix="pawwake-run-"))
    workdir = Path(tempfile.mkdtemp(prefix="pawwake-chat-path-"))
    server = start_embedded(workdir / "pg")
    try:
        trace = asyncio.run(run(server.get_uri("postgres"), workdir, args.recall))
    finally:
        stop_embedded(server)
        shutil.rmtree(workdir, ignore_errors=True)
    if args.list:
        for name in sorted(trace.modules):
            print("module", name)
        for statement, times in Counter(trace.statements).items():
            print(f"sql x{times}", statement)
    print(f"before the first upstream byte: {len(trace.modules)} modules of ours, "
          f"{len(trace.statements)} SQL statements")


if __name__ == "__main__":
    main()
