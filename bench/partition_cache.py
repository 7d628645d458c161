"""Prompt-cache friendliness of partition mode, measured on a scripted 200-round conversation.

    python bench/partition_cache.py [--rounds 200] [--x 15] [--samples 100]

The gateway runs as a subprocess (embedded PostgreSQL in a temporary data dir, partition mode,
a Claude model name so cache breakpoints are kept) in front of a recording fake provider that
runs in this process. The client sends only the latest message each round (Chinese and English,
every seventh round a tool round: tool call, tool result, final answer). Reported:
- for each request, the share of its characters (JSON-serialised messages) that sit in a
  byte-identical prefix of the previous request up to that request's last cache breakpoint,
  median and minimum over normal rounds, with rotation rounds reported on their own;
- the largest prompt over the run (characters), which must stay bounded;
- the gateway's added time to first token in partition mode with 10k stored messages in the
  thread (p50/p95 against the provider reached directly).
Never run by the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parent))

from overhead import (
    GATEWAY_KEY,
    free_port,
    gateway_env,
    percentile,
    reply_chunks,
    stop,
    wait_until_up,
)

ROOT = Path(__file__).resolve().parents[1]
MODEL = "anthropic/claude-bench"
SUMMARY_MODEL = "bench/summary"
SESSION = "bench-thread"
TOOL_EVERY = 7
CONTENT_ONLY: list[float] = []  # the same share with cache markers ignored
BROKEN: list[str] = []
WORST: list[Any] = []  # the normal request with the smallest share, and the one before it  # where a request first differs inside the previous cached prefix


class Recorder:
    """The fake provider: answers chat at once, summaries with a short text, tool rounds with a
    tool call; keeps every chat body it was sent."""

    def __init__(self) -> None:
        self.chats: list[list[dict[str, Any]]] = []
        self.summaries = 0
        self.stream_chunks = reply_chunks(4)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        if body.get("model") == SUMMARY_MODEL:
            self.summaries += 1
            return web.json_response(_completion(f"摘要 {self.summaries}: earlier talk."))
        if body.get("stream"):
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await response.prepare(request)
            for chunk in self.stream_chunks:
                await response.write(chunk)
            await response.write_eof()
            return response
        messages = body["messages"]
        self.chats.append(messages)
        last = messages[-1]
        text = last.get("content") if isinstance(last.get("content"), str) else ""
        if last.get("role") == "user" and "[tool]" in text:
            call = {"id": f"call_{len(self.chats)}", "type": "function",
                    "function": {"name": "lookup", "arguments": json.dumps({"q": len(self.chats)})}}
            return web.json_response(_completion(None, [call]))
        return web.json_response(_completion(f"回答 {len(self.chats)}：好的, noted."))


def _completion(text: str | None, tool_calls: list[dict[str, Any]] | None = None
                ) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {"id": "chatcmpl-bench", "object": "chat.completion", "created": 1_700_000_000,
            "model": MODEL, "choices": [{"index": 0, "message": message,
                                         "finish_reason": "tool_calls" if tool_calls else "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}


def user_text(n: int) -> str:
    base = (f"第{n}轮：今天我们聊聊爪迹的记忆。" if n % 2 else
            f"Round {n}: tell me more about the paw prints on the window.")
    return base + (" [tool] please look it up." if n % TOOL_EVERY == 0 else "")


def breakpoint_end(messages: list[dict[str, Any]], rendered: list[dict[str, Any]]) -> int:
    """Characters of the serialised ``rendered`` list up to the end of the message that holds
    the last breakpoint of ``messages``."""
    last = -1
    for index, message in enumerate(messages):
        content = message.get("content")
        if isinstance(content, list) and any(
                isinstance(part, dict) and "cache_control" in part for part in content):
            last = index
    if last < 0:
        return 0
    return len(json.dumps(rendered[:last + 1], ensure_ascii=False)) - 1


def unmarked(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages without cache markers, a lone text block written as a plain string: the form
    in which only content, not where the breakpoints sit, is compared."""
    out = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            parts = [{k: v for k, v in part.items() if k != "cache_control"}
                     if isinstance(part, dict) else part for part in content]
            content = parts[0]["text"] if parts and len(parts) == 1 and set(parts[0]) == {
                "type", "text"} else parts
        out.append({**message, "content": content})
    return out


def cached_share(previous: list[dict[str, Any]], current: list[dict[str, Any]],
                 strict: bool = True) -> float:
    end = breakpoint_end(previous, previous if strict else unmarked(previous))
    if not strict:
        previous, current = unmarked(previous), unmarked(current)
    before = json.dumps(previous, ensure_ascii=False)
    now = json.dumps(current, ensure_ascii=False)
    limit = min(end, len(now))
    same = 0
    while same < limit and before[same] == now[same]:
        same += 1
    if same < limit and strict:
        BROKEN.append(where(previous, current, same))
    return same / len(now)


def where(previous: list[dict[str, Any]], current: list[dict[str, Any]], offset: int) -> str:
    """Which message first differs (at a character offset of the serialised request), and how."""
    for index in range(len(current)):
        if len(json.dumps(current[:index + 1], ensure_ascii=False)) > offset:
            was = json.dumps(previous[index], ensure_ascii=False) if index < len(previous) else ""
            now = json.dumps(current[index], ensure_ascii=False)
            return f"message {index} of {len(current)}: {was[:120]} -> {now[:120]}"
    return "end"


async def post(session: aiohttp.ClientSession, url: str, messages: list[dict[str, Any]]
               ) -> dict[str, Any]:
    headers = {"X-Gateway-Key": GATEWAY_KEY, "X-Session-Id": SESSION}
    async with session.post(url, json={"model": MODEL, "stream": False, "messages": messages},
                            headers=headers) as response:
        if response.status != 200:
            raise RuntimeError(f"gateway answered {response.status}: {await response.text()}")
        return await response.json()


async def replay(session: aiohttp.ClientSession, url: str, recorder: Recorder, rounds: int
                 ) -> tuple[list[float], list[float], int]:
    normal: list[float] = []
    rotation: list[float] = []
    largest = 0
    for n in range(1, rounds + 1):
        first = len(recorder.chats)
        data = await post(session, url, [{"role": "user", "content": user_text(n)}])
        calls = data["choices"][0]["message"].get("tool_calls")
        if calls:
            await asyncio.sleep(0.05)
            await post(session, url, [{"role": "tool", "tool_call_id": calls[0]["id"],
                                       "content": f"result {n}: 晴"}])
        await asyncio.sleep(0.05)  # let the gateway finish storing the round
        for index in range(first, len(recorder.chats)):
            largest = max(largest, len(json.dumps(recorder.chats[index], ensure_ascii=False)))
            if index == 0:
                continue
            # A rotation rewrites the summary in the system message; nothing else does.
            rotated = recorder.chats[index - 1][0] != recorder.chats[index][0]
            broken_before = len(BROKEN)
            share = cached_share(recorder.chats[index - 1], recorder.chats[index])
            if rotated:
                del BROKEN[broken_before:]
            (rotation if rotated else normal).append(share)
            if not rotated and share <= min(normal):
                WORST[:] = [index, share, recorder.chats[index - 1], recorder.chats[index]]
            if not rotated:
                CONTENT_ONLY.append(cached_share(recorder.chats[index - 1],
                                                 recorder.chats[index], strict=False))
    return normal, rotation, largest


def bulk_insert(data_dir: Path, count: int) -> str:
    import psycopg2

    lines = (data_dir / "postgres" / "postmaster.pid").read_text().splitlines()
    conn = psycopg2.connect(host=lines[4], port=lines[3], user="postgres", dbname="postgres")
    try:
        with conn, conn.cursor() as cur:
            cur.execute("SELECT session_id, min(created_at) FROM conversations GROUP BY 1")
            session_id, oldest = cur.fetchone()
            cur.execute(
                "INSERT INTO conversations (session_id, role, content, model, metadata,"
                " created_at, source)"
                " SELECT %s, CASE WHEN g %% 2 = 0 THEN 'user' ELSE 'assistant' END,"
                " '旧消息 old message ' || g, %s, '{}'::jsonb,"
                " %s::timestamptz - make_interval(secs => %s - g), 'import'"
                " FROM generate_series(0, %s - 1) AS g",
                (session_id, MODEL, oldest, count, count))
            cur.execute("SELECT count(*) FROM conversations WHERE session_id = %s", (session_id,))
            total = cur.fetchone()[0]
    finally:
        conn.close()
    return f"{total} messages in session {session_id}"


async def ttft(session: aiohttp.ClientSession, url: str, headers: dict[str, str], n: int
               ) -> float:
    body = {"model": MODEL, "stream": True,
            "messages": [{"role": "user", "content": f"ttft {n}: 你好"}]}
    started = time.perf_counter()
    async with session.post(url, json=body, headers=headers) as response:
        if response.status != 200:
            raise RuntimeError(f"{url} answered {response.status}: {await response.text()}")
        await response.content.readany()
        elapsed = time.perf_counter() - started
        await response.read()
    return elapsed


def launch(port: int, data_dir: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with (data_dir / "gateway.log").open("wb") as log_file:
        return subprocess.Popen([sys.executable, "pawwake.py", "--host", "127.0.0.1",
                                 "--port", str(port)], cwd=ROOT, stdout=log_file,
                                stderr=subprocess.STDOUT, env=env)


def report(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def main(args: argparse.Namespace) -> None:
    recorder = Recorder()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", recorder.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    upstream_port, port = free_port(), free_port()
    await web.TCPSite(runner, "127.0.0.1", upstream_port).start()
    data_dir = Path(tempfile.mkdtemp(prefix="pawwake-partition-bench-"))
    env = gateway_env(upstream_port, "persist", data_dir)
    env.update({"CACHE_PARTITION_ENABLED": "true", "CACHE_PARTITION_X": str(args.x),
                "DEFAULT_MODEL": MODEL, "CACHE_SUMMARY_MODEL": SUMMARY_MODEL,
                "LOG_LEVEL": "WARNING"})
    gateway = launch(port, data_dir, env)
    try:
        await wait_until_up(f"http://127.0.0.1:{port}/")
        url = f"http://127.0.0.1:{port}/v1/chat/completions"
        async with aiohttp.ClientSession() as session:
            normal, rotation, largest = await replay(session, url, recorder, args.rounds)
            report(f"rounds {args.rounds}, X = {args.x}, upstream chat requests "
                  f"{len(recorder.chats)}, summaries {recorder.summaries}")
            report(f"cached prefix share, normal requests ({len(normal)}): "
                  f"median {statistics.median(normal):.1%}, min {min(normal):.1%}")
            if rotation:
                report(f"cached prefix share, rotation requests ({len(rotation)}): "
                      f"median {statistics.median(rotation):.1%}, min {min(rotation):.1%}")
            index, share, before, after = WORST
            report(f"lowest normal share: request {index} ({share:.1%}), "
                   f"{len(before)} -> {len(after)} messages, last role "
                   f"{before[-1].get('role')} -> {after[-1].get('role')}")
            report(f"the same, cache markers ignored: median "
                   f"{statistics.median(CONTENT_ONLY):.1%}, min {min(CONTENT_ONLY):.1%}")
            broken = BROKEN
            report(f"normal requests that broke the previous cached prefix: {len(broken)}"
                   + (f"; first: {broken[0]}; last: {broken[-1]}" if broken else ""))
            report(f"largest prompt: {largest} characters")
            report("stored: " + await asyncio.to_thread(bulk_insert, data_dir, args.stored))
            direct = f"http://127.0.0.1:{upstream_port}/v1/chat/completions"
            targets = {"direct": (direct, {}), "gateway": (url, {
                "X-Gateway-Key": GATEWAY_KEY, "X-Session-Id": SESSION})}
            times: dict[str, list[float]] = {name: [] for name in targets}
            for n in range(args.samples + 5):
                for name, (target, headers) in targets.items():
                    value = await ttft(session, target, headers, n)
                    if n >= 5:
                        times[name].append(value)
            added = [g - d for g, d in zip(times["gateway"], times["direct"], strict=True)]
            report(f"TTFT at {args.stored} stored messages (ms): direct p50 "
                  f"{percentile(times['direct'], 0.5) * 1e3:.1f}, gateway p50 "
                  f"{percentile(times['gateway'], 0.5) * 1e3:.1f} p95 "
                  f"{percentile(times['gateway'], 0.95) * 1e3:.1f}; added p50 "
                  f"{percentile(added, 0.5) * 1e3:.1f} p95 {percentile(added, 0.95) * 1e3:.1f}")
    finally:
        await asyncio.to_thread(stop, gateway)
        await runner.cleanup()
        await asyncio.to_thread(shutil.rmtree, data_dir, True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--x", type=int, default=15)
    parser.add_argument("--stored", type=int, default=10_000)
    parser.add_argument("--samples", type=int, default=100)
    asyncio.run(main(parser.parse_args()))
