"""A scripted fault run: does anything the user said get lost or written twice?

    python bench/faults.py [--chats 300] [--concurrency 8] [--seed 7]
    python bench/faults.py --mode database-kill   (bench/database_kill.py: the embedded
                                                   PostgreSQL killed mid-load, healed in place)
    python bench/faults.py --mode public-attack   (bench/public_attack.py: gzip bomb and
                                                    slowloris on the public routes)

A real gateway process (``pawwake.py``) against a fake provider (a subprocess of this script)
and a PostgreSQL of its own (embedded, in a temporary folder), all on loopback. Every chat opens
its own session and carries a unique token; the client hangs up at a random point (before the
first byte, mid-stream, right after the finish_reason, right after [DONE]) or reads to the end;
some messages carry a NUL or a lone surrogate. The provider sends its usage chunk a little after
the finish_reason, as real ones do. During the run PostgreSQL is stopped and started again,
and later the gateway is killed with ``kill -9`` while extraction jobs run (the fake memory
model answers slowly, with JSON naming the chat's token) and restarted on the same data.

Printed: turns expected, stored, flagged incomplete, lost and duplicated; memories expected,
extracted and duplicated; extraction jobs lost (not done when the run ends). Bounded: every
wait has a deadline. Never run by the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import public_attack  # noqa: E402
from bench.overhead import free_port, gateway_env, stop, wait_until_up  # noqa: E402

GATEWAY_KEY = "bench-gateway-key-0123456789"
MODES = ("full", "before_first_byte", "mid_stream", "after_finish", "after_done")
TOKEN = re.compile(r"TOKEN-\d+")


# ---- the fake provider (runs in its own process) -------------------------------------------

def sse(payload: Any) -> bytes:
    text = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False)
    return f"data: {text}\n\n".encode()


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"id": "chatcmpl-faults", "object": "chat.completion.chunk", "created": 1,
            "model": "bench/model", "choices": [{"index": 0, "delta": delta,
                                                 "finish_reason": finish}]}


def serve_upstream(port: int, ttft: float, memory_delay: float) -> None:
    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        prompt = json.dumps(body.get("messages"), ensure_ascii=False)
        if not body.get("stream"):  # the memory model: JSON naming the chat's token
            await asyncio.sleep(memory_delay)
            tokens = sorted(set(TOKEN.findall(prompt.split("Conversation:")[-1])))
            memories = [{"content": f"用户的代号是 {token}", "importance": 5, "action": "new",
                         "candidate_id": None, "remind_at": None, "source_refs": [1]}
                        for token in tokens]
            return web.json_response({
                "id": "x", "object": "chat.completion", "model": "bench/memory",
                "choices": [{"index": 0, "finish_reason": "stop", "message": {
                    "role": "assistant",
                    "content": json.dumps({"memories": memories}, ensure_ascii=False)}}],
                "usage": {"prompt_tokens": 50, "completion_tokens": 20, "total_tokens": 70}})
        await asyncio.sleep(ttft)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        with contextlib.suppress(ConnectionResetError):
            await response.write(sse(chunk({"role": "assistant", "content": ""})))
            for piece in ("好的，", "我记住了。", "还有别的吗？"):
                await asyncio.sleep(0.01)
                await response.write(sse(chunk({"content": piece})))
            await response.write(sse(chunk({}, "stop")))
            await asyncio.sleep(0.05)  # the usage chunk comes a little later
            await response.write(sse({"id": "chatcmpl-faults", "object": "chat.completion.chunk",
                                      "choices": [], "usage": {"prompt_tokens": 30,
                                                               "completion_tokens": 9,
                                                               "total_tokens": 39}}))
            await response.write(sse("[DONE]"))
            await response.write_eof()
        return response

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "bench/model"}]})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/v1/models", models)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


# ---- one chat ------------------------------------------------------------------------------

class Plan:
    """What chat ``number`` sends and when its client hangs up."""

    def __init__(self, number: int, rng: random.Random) -> None:
        self.number = number
        self.mode = rng.choice(MODES)
        self.text_kind = rng.choices(("plain", "nul", "surrogate"), (8, 1, 1))[0]
        self.session = f"faults-{number}"
        self.token = f"TOKEN-{number}"
        self.sent = False  # the request reached the gateway (it answered something)

    def body(self) -> bytes:
        text = f"{self.token} 我的猫叫团子"
        if self.text_kind == "nul":
            text += "\u0000尾巴"
        elif self.text_kind == "surrogate":
            text += "\ud800尾巴"
        return json.dumps({"model": "bench/model", "stream": True,
                           "messages": [{"role": "user", "content": text}]}).encode()

    @property
    def expect_complete(self) -> bool:
        return self.mode in ("full", "after_finish", "after_done")


async def run_chat(session: aiohttp.ClientSession, url: str, plan: Plan) -> None:
    headers = {"Authorization": f"Bearer {GATEWAY_KEY}", "Content-Type": "application/json",
               "X-Session-Id": plan.session}
    try:
        if plan.mode == "before_first_byte":
            with contextlib.suppress(TimeoutError):
                async with session.post(url, data=plan.body(), headers=headers,
                                        timeout=aiohttp.ClientTimeout(total=0.08)) as response:
                    await response.read()
            plan.sent = True
            return
        async with session.post(url, data=plan.body(), headers=headers,
                                timeout=aiohttp.ClientTimeout(total=20)) as response:
            plan.sent = response.status == 200
            seen = b""
            marker = {"mid_stream": b"\xe5\xa5\xbd", "after_finish": b'"finish_reason": "stop"',
                      "after_done": b"[DONE]"}.get(plan.mode)
            while chunk_ := await response.content.readany():
                seen += chunk_
                if marker is not None and marker in seen:
                    response.close()
                    return
    except (aiohttp.ClientError, OSError, TimeoutError):
        pass


async def run_chats(url: str, plans: list[Plan], concurrency: int) -> None:
    queue = list(plans)

    async def worker(session: aiohttp.ClientSession) -> None:
        while queue:
            await run_chat(session, url, queue.pop(0))

    async with aiohttp.ClientSession() as session:
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))


# ---- the run -------------------------------------------------------------------------------

def start_gateway(port: int, upstream_port: int, data_dir: Path, dsn: str
                  ) -> subprocess.Popen[bytes]:
    env = gateway_env(upstream_port, "persist", data_dir)
    env.update({"DATABASE_URL": dsn, "MEMORY_ENABLED": "true", "MEMORY_EXTRACT_INTERVAL": "1",
                "MEMORY_MODEL": "bench/memory", "MEMORY_VECTOR_ENABLED": "false",
                "GATEWAY_SECRET": GATEWAY_KEY, "JOB_WORKERS": "2"})
    log_file = (data_dir / "gateway.log").open("ab")
    return subprocess.Popen([sys.executable, "pawwake.py", "--host", "127.0.0.1",
                             "--port", str(port)], cwd=ROOT, stdout=log_file,
                            stderr=subprocess.STDOUT, env=env)


def query(dsn: str, sql: str) -> list[tuple[Any, ...]]:
    import psycopg2

    conn = psycopg2.connect(dsn)
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            return cur.fetchall()
    finally:
        conn.close()


async def wait_for(check: Any, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if await asyncio.to_thread(check):
            return True
        await asyncio.sleep(0.5)
    return False


def main(args: argparse.Namespace) -> None:
    from pawwake.db.embedded import start_embedded, stop_embedded

    rng = random.Random(args.seed)
    plans = [Plan(n, rng) for n in range(args.chats)]
    work = Path(tempfile.mkdtemp(prefix="pawwake-faults-"))
    data_dir = work / "gateway"
    data_dir.mkdir()
    server = start_embedded(work / "pg")
    dsn = server.get_uri()
    upstream_port, port = free_port(), free_port()
    upstream = subprocess.Popen([sys.executable, __file__, "--serve-upstream",
                                 str(upstream_port), "--memory-delay", str(args.memory_delay)])
    gateway = start_gateway(port, upstream_port, data_dir, dsn)
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    third = len(plans) // 3
    jobs_at_kill = 0
    try:
        asyncio.run(wait_until_up(f"http://127.0.0.1:{upstream_port}/v1/models"))
        asyncio.run(wait_until_up(f"http://127.0.0.1:{port}/"))
        asyncio.run(run_chats(url, plans[:third], args.concurrency))

        async def with_database_outage() -> None:
            chats = asyncio.create_task(run_chats(url, plans[third:2 * third],
                                                  args.concurrency))
            await asyncio.sleep(0.3)
            await asyncio.to_thread(stop_embedded, server)
            print("PostgreSQL stopped during chats", flush=True)
            await asyncio.sleep(args.outage)
            await chats
            return None

        asyncio.run(with_database_outage())
        server = start_embedded(work / "pg")
        print("PostgreSQL started again", flush=True)
        asyncio.run(run_chats(url, plans[2 * third:], args.concurrency))
        # kill -9 while extraction jobs run, then restart on the same data.
        asyncio.run(wait_for(lambda: bool(query(dsn, "SELECT 1 FROM jobs WHERE"
                                                " status = 'running' LIMIT 1")), 20))
        jobs_at_kill = query(dsn, "SELECT count(*) FROM jobs WHERE status IN"
                                  " ('pending', 'running')")[0][0]
        gateway.send_signal(signal.SIGKILL)
        gateway.wait()
        print(f"gateway killed with {jobs_at_kill} jobs pending or running", flush=True)
        gateway = start_gateway(port, upstream_port, data_dir, dsn)
        asyncio.run(wait_until_up(f"http://127.0.0.1:{port}/"))
        asyncio.run(wait_for(lambda: not query(dsn, "SELECT 1 FROM jobs WHERE status IN"
                                                    " ('pending', 'running') LIMIT 1"),
                             args.job_wait))
        report(plans, dsn, jobs_at_kill)
    finally:
        stop(gateway)
        stop(upstream)
        with contextlib.suppress(Exception):
            stop_embedded(server)
        shutil.rmtree(work, ignore_errors=True)


def report(plans: list[Plan], dsn: str, jobs_at_kill: int) -> None:
    rows = query(dsn, "SELECT session_id, role, (metadata->>'incomplete') IS NOT NULL"
                      " FROM conversations WHERE session_id LIKE 'faults-%'")
    users: dict[str, int] = {}
    incomplete: set[str] = set()
    replies: dict[str, int] = {}
    for session_id, role, flagged in rows:
        if role == "user":
            users[session_id] = users.get(session_id, 0) + 1
        else:
            replies[session_id] = replies.get(session_id, 0) + 1
        if flagged:
            incomplete.add(session_id)
    expected = [p for p in plans if p.sent]
    stored = [p for p in expected if p.session in users]
    lost = [p for p in expected if p.session not in users]
    duplicated = sum(1 for count in users.values() if count > 1) + sum(
        1 for count in replies.values() if count > 1)
    complete_expected = [p for p in expected if p.expect_complete]
    complete_ok = [p for p in complete_expected if p.session in users
                   and p.session not in incomplete]
    memories = [content for (content,) in query(
        dsn, "SELECT content FROM memories WHERE content LIKE '%TOKEN-%'")]
    tokens = [m for text in memories for m in TOKEN.findall(text)]
    wanted = {p.token for p in complete_ok}
    jobs = query(dsn, "SELECT status, count(*) FROM jobs GROUP BY status ORDER BY status")
    not_done = sum(count for status, count in jobs if status != "done")
    out = sys.stdout.write
    out(f"chats sent                      {len(plans)}\n")
    for mode in MODES:
        group = [p for p in expected if p.mode == mode]
        out(f"  {mode:<30}{len(group):>5} stored {sum(p.session in users for p in group)}\n")
    out(f"  with NUL / lone surrogate       {sum(p.text_kind == 'nul' for p in plans)} / "
        f"{sum(p.text_kind == 'surrogate' for p in plans)}; lost among them: NUL "
        f"{sum(p.text_kind == 'nul' for p in lost)}, surrogate "
        f"{sum(p.text_kind == 'surrogate' for p in lost)}\n")
    out(f"turns expected                  {len(expected)}\n")
    out(f"turns stored                    {len(stored)}\n")
    out(f"  complete where finished       {len(complete_ok)} of {len(complete_expected)}\n")
    out(f"turns flagged incomplete        {len(incomplete)}\n")
    out(f"turns lost                      {len(lost)}\n")
    out(f"turns duplicated                {duplicated}\n")
    out(f"memories expected               {len(wanted)}\n")
    out(f"memories extracted              {len(wanted & set(tokens))}\n")
    out(f"memories duplicated             {len(tokens) - len(set(tokens))}\n")
    out(f"jobs pending/running at kill    {jobs_at_kill}\n")
    out(f"jobs lost (not done at the end) {not_done}  {dict(jobs)}\n")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--outage", type=float, default=3.0, help="seconds PostgreSQL is down")
    parser.add_argument("--memory-delay", type=float, default=0.5)
    parser.add_argument("--job-wait", type=float, default=90.0,
                        help="longest wait for the jobs to finish after the restart")
    parser.add_argument("--serve-upstream", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--mode", choices=("faults", "public-attack", "database-kill"),
                        default="faults")
    public_attack.add_arguments(parser)
    from bench import database_kill

    database_kill.add_arguments(parser)
    arguments = parser.parse_args()
    if arguments.serve_upstream:
        serve_upstream(arguments.serve_upstream, 0.05, arguments.memory_delay)
    elif arguments.mode == "public-attack":
        public_attack.run(arguments)
    elif arguments.mode == "database-kill":
        database_kill.main(arguments)
    else:
        main(arguments)
