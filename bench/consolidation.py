"""Consolidation: draft generation for 500 fragments over 10 days, and confirm/revert latency
(standalone; not run by pytest).

Starts the real gateway on a throwaway embedded PostgreSQL and a fake model on loopback that
answers at once with a valid grouping (runs of five consecutive items), so the figures are the
gateway's own overhead: reading the day, building prompts, HTTP to the model, parsing and
checking the answers, recording usage and progress, storing the drafts. Then it confirms drafts
one by one (the merge transaction) and reverts some merges.

    python bench/consolidation.py [--fragments 500] [--days 10] [--runs 5] [--confirms 50]
                                  [--max-parts 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import random
import re
import shutil
import socket
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pawwake.app import create_app
from pawwake.db.pool import cursor
from pawwake.services import services_of
from pawwake.settings import Settings

log = logging.getLogger("bench")
ITEM = re.compile(r"^(\d+)\. \[[0-9-]+\] \(importance \d+\) (.*)$")
GROUP_SIZE = 5
PEOPLE = ("阿杰", "妈妈", "小林", "Karen", "外婆", "同事老王", "Lily")
PLACES = ("外滩", "公司楼下的咖啡店", "徐汇滨江", "健身房", "医院", "超市", "老家", "地铁上")
THINGS = ("聊了很久关于换工作的事", "一起吃了火锅", "跑了五公里", "看了一场电影",
          "讨论了下个月去杭州的计划", "拍了很多照片", "买了一条羊绒围巾", "学了一首新的吉他曲")
FEELINGS = ("心情特别好", "有点累但是很满足", "其实有点焦虑", "觉得很温暖", "后来有点后悔",
            "感觉终于放松下来了")


class FakeModel:
    """Answers every grouping prompt with valid groups at once; times its own work."""

    def __init__(self) -> None:
        self.calls = 0
        self.busy_seconds = 0.0

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self.complete)
        return app

    async def complete(self, request: web.Request) -> web.Response:
        started = time.perf_counter()
        body = await request.json()
        prompt = body["messages"][0]["content"]
        items = [m.groups() for m in map(ITEM.match, prompt.split("Items:\n", 1)[-1]
                                         .splitlines()) if m]
        groups = []
        for start in range(0, len(items), GROUP_SIZE):
            run = items[start:start + GROUP_SIZE]
            groups.append({"title": f"事件{start // GROUP_SIZE + 1}",
                           "content": "；".join(text for _, text in run),
                           "importance": 6, "merged_ids": [int(n) for n, _ in run]})
        text = json.dumps(groups, ensure_ascii=False)
        reply = {"id": "bench", "object": "chat.completion", "model": body["model"],
                 "choices": [{"index": 0, "finish_reason": "stop",
                              "message": {"role": "assistant", "content": text}}],
                 "usage": {"prompt_tokens": len(prompt) // 2,
                           "completion_tokens": len(text) // 2,
                           "total_tokens": (len(prompt) + len(text)) // 2}}
        self.calls += 1
        self.busy_seconds += time.perf_counter() - started
        return web.json_response(reply)


def fragment_text(rng: random.Random, max_parts: int) -> str:
    parts = [f"和{rng.choice(PEOPLE)}在{rng.choice(PLACES)}{rng.choice(THINGS)}，"
             f"{rng.choice(FEELINGS)}" for _ in range(rng.randint(1, max_parts))]
    return "。".join(parts) + "。"


async def insert_fragments(app: web.Application, count: int, days: int, max_parts: int
                           ) -> None:
    rng = random.Random(7)
    first_day = datetime(2025, 3, 1, tzinfo=UTC) - timedelta(hours=8)  # local midnight, UTC+8
    rows = []
    for n in range(count):
        day, slot = divmod(n, count // days)
        created = first_day + timedelta(days=day, minutes=30 + slot * 1380 // (count // days))
        rows.append((fragment_text(rng, max_parts), rng.randint(3, 8), created))
    async with cursor(services_of(app).database.pool) as cur:
        values = ", ".join(["(%s, %s, %s)"] * len(rows))
        await cur.execute(f"INSERT INTO memories (content, importance, created_at) VALUES {values}",
                          [v for row in rows for v in row])


def free_socket() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    return sock


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


async def timed(call: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    result = await call
    return (time.perf_counter() - started) * 1000.0, result


async def main(options: argparse.Namespace) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="pawwake-bench-consolidation-", dir="/tmp"))
    model = FakeModel()
    model_runner = web.AppRunner(model.app())
    await model_runner.setup()
    model_sock = free_socket()
    await web.SockSite(model_runner, model_sock).start()
    settings = Settings.from_env(
        {}, PAWWAKE_DATA_DIR=str(workdir / "data"), API_KEY="bench-key",
        API_BASE_URL=f"http://127.0.0.1:{model_sock.getsockname()[1]}/v1",
        MEMORY_MODEL="bench/memory", JOB_WORKERS=0, MEMORY_VECTOR_ENABLED=False,
        TIMEZONE_HOURS=8)
    app = create_app(settings)
    runner = web.AppRunner(app)
    await runner.setup()
    gateway_sock = free_socket()
    await web.SockSite(runner, gateway_sock).start()
    base = f"http://127.0.0.1:{gateway_sock.getsockname()[1]}"
    try:
        async with aiohttp.ClientSession(base) as http:
            await insert_fragments(app, options.fragments, options.days, options.max_parts)
            last_day = (datetime(2025, 3, 1) + timedelta(days=options.days - 1)).date()
            request = {"date_from": "2025-03-01", "date_to": last_day.isoformat()}
            runs, drafts, stats = [], [], {}
            for _ in range(options.runs):
                calls, busy = model.calls, model.busy_seconds
                started = time.perf_counter()
                async with http.post("/api/memories/consolidate", json=request) as response:
                    assert response.status == 202, await response.text()
                await services_of(app).jobs.run_until_idle()
                async with http.get("/api/memories/consolidate/status") as response:
                    shown = await response.json()
                total = time.perf_counter() - started
                assert shown["status"] == "done", shown
                drafts, stats = shown["drafts"], shown["stats"]
                runs.append((total, model.busy_seconds - busy, model.calls - calls))
            status_ms = [(await timed(_get(http, "/api/memories/consolidate/status")))[0]
                         for _ in range(20)]

            confirm_ms = []
            for draft in drafts[:options.confirms + 1]:
                elapsed, (code, body) = await timed(_post(http, "/api/memories/merge",
                                                          {"draft_id": draft["draft_id"]}))
                assert code == 201, body
                confirm_ms.append(elapsed)
                draft["merged_id"] = body["memory"]["id"]
            confirm_ms = confirm_ms[1:]  # the first one loads the tokenizer
            revert_ms = []
            for draft in drafts[:options.reverts]:
                elapsed, (code, body) = await timed(
                    _post(http, f"/api/memories/{draft['merged_id']}/revert-merge", {}))
                assert code == 200, body
                revert_ms.append(elapsed)
            candidates_ms = [(await timed(_get(http, "/api/memories/core-candidates")))[0]
                             for _ in range(20)]
    finally:
        await runner.cleanup()
        await model_runner.cleanup()
        shutil.rmtree(workdir, ignore_errors=True)

    totals = [r[0] for r in runs]
    overhead = [r[0] - r[1] for r in runs]
    print_report = log.info
    print_report("%s fragments over %s days -> %s drafts; per run: %s model calls, %s halvings",
                 options.fragments, options.days, len(drafts), runs[-1][2],
                 stats.get("halvings"))
    print_report("draft generation (request -> job done -> status with drafts), %s runs:",
                 len(runs))
    print_report("  wall      median %.0f ms  min %.0f ms  max %.0f ms",
                 statistics.median(totals) * 1000, min(totals) * 1000, max(totals) * 1000)
    print_report("  gateway   median %.0f ms (wall minus the fake model's own %.1f ms);"
                 " %.2f ms per fragment", statistics.median(overhead) * 1000,
                 statistics.median(r[1] for r in runs) * 1000,
                 statistics.median(overhead) * 1000 / options.fragments)
    for name, values in ((f"status poll ({len(drafts)} drafts)", status_ms),
                         (f"confirm ({GROUP_SIZE} sources each)", confirm_ms),
                         ("revert-merge", revert_ms), ("core-candidates", candidates_ms)):
        print_report("  %-28s n=%-3s p50 %.1f ms  p95 %.1f ms  max %.1f ms", name,
                     len(values), percentile(values, 0.5), percentile(values, 0.95),
                     max(values))


async def _get(http: aiohttp.ClientSession, path: str) -> Any:
    async with http.get(path) as response:
        return await response.read()


async def _post(http: aiohttp.ClientSession, path: str, body: Any) -> tuple[int, Any]:
    async with http.post(path, json=body) as response:
        return response.status, await response.json()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fragments", type=int, default=500)
    parser.add_argument("--days", type=int, default=10)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--confirms", type=int, default=50)
    parser.add_argument("--reverts", type=int, default=20)
    parser.add_argument("--max-parts", type=int, default=8,
                        help="sentences per fragment, at most (16 makes days need halving)")
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    log.setLevel(logging.INFO)
    asyncio.run(main(parser.parse_args()))
