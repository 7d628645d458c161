"""Prompt-cache friendliness of partition mode, measured on a scripted 200-round conversation.

    python bench/partition_cache.py [--rounds 200] [--x 15] [--samples 100]

The gateway runs as a subprocess (embedded PostgreSQL in a temporary data dir, partition mode,
a Claude model name so cache breakpoints are kept) in front of a recording fake provider that
runs in this process. The client sends only the latest message each round (Chinese and English,
every seventh round a tool round: tool call, tool result, final answer). Reported:
- for each request, the share of its characters (JSON-serialised messages) that sit in a
  byte-identical prefix of the previous request up to that request's last cache breakpoint,
  median and minimum over normal rounds, with rotation rounds reported on their own; once
  with the raw bytes (a moved marker counts as a difference), once with strings and lone text
  blocks treated alike (content only), and once with only the ``cache_control`` keys removed
  and the form kept: the honest figure, since a marker is not content but a provider hashes
  a string and a block list differently. For the last two, the normal requests whose prefix
  breaks before the previous request's last breakpoint are counted (target: none);
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
from dataclasses import dataclass, field
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


@dataclass
class Measures:
    """Per upstream chat request after the first: prefix shares and where prefixes broke."""

    normal: list[float] = field(default_factory=list)  # raw bytes, markers included
    rotation: list[float] = field(default_factory=list)
    broken: list[str] = field(default_factory=list)
    content_only: list[float] = field(default_factory=list)  # markers ignored, forms merged
    form_kept: list[float] = field(default_factory=list)  # markers removed, form kept
    form_kept_rotation: list[float] = field(default_factory=list)
    form_kept_broken: list[str] = field(default_factory=list)
    worst: list[Any] = field(default_factory=list)  # lowest raw normal share: index, share,
    # the request before it and the request itself


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


def without_markers(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages with every ``cache_control`` key removed and nothing else changed: the bytes
    a provider hashes for the prefix, since a marker says where to cache, not what."""
    def clean(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items() if k != "cache_control"}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value
    return clean(messages)


def prefix_share(previous: list[dict[str, Any]], current: list[dict[str, Any]], end: int,
                 broken: list[str] | None) -> float:
    """The share of ``current`` (serialised) that repeats ``previous`` byte for byte, counted
    up to ``end``; a difference before ``end`` is recorded in ``broken``."""
    before = json.dumps(previous, ensure_ascii=False)
    now = json.dumps(current, ensure_ascii=False)
    limit = min(end, len(now))
    same = 0
    while same < limit and before[same] == now[same]:
        same += 1
    if same < limit and broken is not None:
        broken.append(where(previous, current, same))
    return same / len(now)


def cached_share(previous: list[dict[str, Any]], current: list[dict[str, Any]],
                 broken: list[str] | None = None, strict: bool = True) -> float:
    """Raw bytes (``strict``) or content only (markers ignored, lone blocks as strings)."""
    end = breakpoint_end(previous, previous if strict else unmarked(previous))
    if not strict:
        previous, current = unmarked(previous), unmarked(current)
    return prefix_share(previous, current, end, broken)


def form_kept_share(previous: list[dict[str, Any]], current: list[dict[str, Any]],
                    broken: list[str] | None = None) -> float:
    """Markers removed, form kept, up to the end of the message holding the previous
    request's last breakpoint."""
    previous_clean = without_markers(previous)
    end = breakpoint_end(previous, previous_clean)
    return prefix_share(previous_clean, without_markers(current), end, broken)


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
                 ) -> tuple[Measures, int]:
    measures = Measures()
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
            if index:
                measure(measures, index, recorder.chats[index - 1], recorder.chats[index])
    return measures, largest


def measure(measures: Measures, index: int, previous: list[dict[str, Any]],
            current: list[dict[str, Any]]) -> None:
    # A rotation rewrites the summary in the system message; nothing else does.
    if previous[0] != current[0]:
        measures.rotation.append(cached_share(previous, current))
        measures.form_kept_rotation.append(form_kept_share(previous, current))
        return
    share = cached_share(previous, current, measures.broken)
    measures.normal.append(share)
    if share <= min(measures.normal):
        measures.worst[:] = [index, share, previous, current]
    measures.content_only.append(cached_share(previous, current, strict=False))
    measures.form_kept.append(form_kept_share(previous, current, measures.form_kept_broken))


def spread(values: list[float]) -> str:
    return f"median {statistics.median(values):.1%}, min {min(values):.1%}"


def breaks(label: str, broken: list[str]) -> str:
    return (f"normal requests that broke the previous {label}: {len(broken)}"
            + (f"; first: {broken[0]}; last: {broken[-1]}" if broken else ""))


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
            measures, largest = await replay(session, url, recorder, args.rounds)
            normal, rotation = measures.normal, measures.rotation
            report(f"rounds {args.rounds}, X = {args.x}, upstream chat requests "
                   f"{len(recorder.chats)}, summaries {recorder.summaries}")
            report(f"cached prefix share, normal requests ({len(normal)}): {spread(normal)}")
            if rotation:
                report(f"cached prefix share, rotation requests ({len(rotation)}): "
                       f"{spread(rotation)}")
            index, share, before, after = measures.worst
            report(f"lowest normal share: request {index} ({share:.1%}), "
                   f"{len(before)} -> {len(after)} messages, last role "
                   f"{before[-1].get('role')} -> {after[-1].get('role')}")
            report(f"the same, cache markers ignored: {spread(measures.content_only)}")
            report(breaks("cached prefix", measures.broken))
            report(f"markers removed, form kept, normal requests ({len(measures.form_kept)}): "
                   f"{spread(measures.form_kept)}")
            if measures.form_kept_rotation:
                report(f"markers removed, form kept, rotation requests "
                       f"({len(measures.form_kept_rotation)}): "
                       f"{spread(measures.form_kept_rotation)}")
            report(breaks("marker-free prefix (form kept)", measures.form_kept_broken))
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
