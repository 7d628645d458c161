"""What the gateway costs: direct vs through Pawwake, against the same fake provider, same run.

    python bench/overhead.py [--samples 300] [--duration 6] [--modes floor,pure,persist]
                             [--protocols chat,messages,responses]

A fake provider (a subprocess of this script) answers every chat request with a fixed time to
first token and a fixed chunk cadence. The gateway runs as ``python pawwake.py --port N`` in a
second subprocess, once per mode: pure forwarding (DATABASE_ENABLED=false) and with
persistence (the embedded PostgreSQL in a temporary data dir); mode ``floor`` runs a bare
aiohttp relay instead, the least any Python hop costs on this machine. Reported: time-to-first-token
overhead (p50/p95, sequential requests, direct and gateway interleaved), completed streams per
second at 1, 20 and 100 concurrent streams, and the gateway's resident memory (VmRSS) idle and
under load. Each protocol in ``--protocols`` (``chat``: /v1/chat/completions, ``messages``:
Anthropic's /v1/messages, ``responses``: OpenAI's /v1/responses; default ``chat``) is measured
against the same fake provider speaking that protocol, with a fresh gateway per mode and
protocol, and gets its own table. Never run by the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pawwake.settings import SETTINGS  # noqa: E402

GATEWAY_KEY = "bench-gateway-key-0123456789"
CONCURRENCY = (1, 20, 100)
TEXT = "爪迹 paw print "


# ---- the fake provider (runs in its own process) -------------------------------------------

def sse(payload: Any) -> bytes:
    return b"data: " + json.dumps(payload, ensure_ascii=False).encode() + b"\n\n"


def reply_chunks(count: int) -> list[bytes]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return sse({"id": "chatcmpl-bench", "object": "chat.completion.chunk",
                    "created": 1_700_000_000, "model": "bench/model",
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    chunks = [chunk({"role": "assistant", "content": ""}) + chunk({"content": TEXT})]
    chunks += [chunk({"content": f"{TEXT}{n} "}) for n in range(1, count)]
    chunks[-1] += (chunk({}, "stop")
                   + sse({"id": "chatcmpl-bench", "object": "chat.completion.chunk",
                          "choices": [], "usage": {"prompt_tokens": 40,
                                                   "completion_tokens": count,
                                                   "total_tokens": 40 + count}})
                   + b"data: [DONE]\n\n")
    return chunks


def event(payload: dict[str, Any]) -> bytes:
    """A typed SSE event (Messages and Responses name each event after its ``type``)."""
    return f"event: {payload['type']}\n".encode() + sse(payload)


def message_chunks(count: int) -> list[bytes]:
    """The same reply as ``reply_chunks`` in Anthropic's Messages events."""
    def delta(text: str) -> bytes:
        return event({"type": "content_block_delta", "index": 0,
                      "delta": {"type": "text_delta", "text": text}})

    start = event({"type": "message_start", "message": {
        "id": "msg_bench", "type": "message", "role": "assistant", "model": "bench/model",
        "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 40, "cache_creation_input_tokens": 0,
                  "cache_read_input_tokens": 0, "output_tokens": 1}}})
    chunks = [start + event({"type": "content_block_start", "index": 0,
                             "content_block": {"type": "text", "text": ""}}) + delta(TEXT)]
    chunks += [delta(f"{TEXT}{n} ") for n in range(1, count)]
    chunks[-1] += (event({"type": "content_block_stop", "index": 0})
                   + event({"type": "message_delta",
                            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                            "usage": {"output_tokens": count}})
                   + event({"type": "message_stop"}))
    return chunks


def responses_chunks(count: int) -> list[bytes]:
    """The same reply as typed Responses events, ``response.completed`` (with the whole
    output and the usage) last."""
    pieces = [TEXT] + [f"{TEXT}{n} " for n in range(1, count)]
    item = {"type": "message", "id": "msg_bench", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": "".join(pieces), "annotations": []}]}
    response = {"id": "resp_bench", "object": "response", "model": "bench/model",
                "status": "in_progress", "output": []}
    chunks = [event({"type": "response.created", "sequence_number": 0,
                               "response": response})
              + event({"type": "response.output_item.added", "sequence_number": 1,
                                 "output_index": 0, "item": {**item, "content": []}})]
    chunks[0] += event({"type": "response.output_text.delta", "sequence_number": 2,
                                  "item_id": "msg_bench", "output_index": 0,
                                  "content_index": 0, "delta": pieces[0]})
    chunks += [event({"type": "response.output_text.delta", "sequence_number": 2 + n,
                                "item_id": "msg_bench", "output_index": 0, "content_index": 0,
                                "delta": piece}) for n, piece in enumerate(pieces[1:], 1)]
    chunks[-1] += (event({"type": "response.output_item.done",
                                    "sequence_number": count + 2, "output_index": 0,
                                    "item": item})
                   + event({"type": "response.completed",
                                      "sequence_number": count + 3, "response": {
                                          **response, "status": "completed", "output": [item],
                                          "usage": {"input_tokens": 40, "output_tokens": count,
                                                    "total_tokens": 40 + count}}}))
    return chunks


RESPONSES_END = b"}}}\n\n"  # usage, response and event closed: response.completed is whole
QUESTION = "第 #N# 个故事：" + "讲一个关于爪迹的故事。" * 20  # #N#: the conversation's number
SYSTEM = "You are a cat."


@dataclass(frozen=True)
class Protocol:
    """What one client API changes in the measurement: where it is served, the request body,
    the provider's reply as chunks and how a whole stream ends. All else is shared."""

    name: str
    path: str
    body: dict[str, Any]
    chunks: Callable[[int], list[bytes]]
    end: bytes


PROTOCOLS = {protocol.name: protocol for protocol in (
    Protocol("chat", "/v1/chat/completions",
             {"model": "bench/model", "stream": True, "messages": [
                 {"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]},
             reply_chunks, b"data: [DONE]\n\n"),
    Protocol("messages", "/v1/messages",
             {"model": "bench/model", "stream": True, "max_tokens": 1024, "system": SYSTEM,
              "messages": [{"role": "user", "content": QUESTION}]},
             message_chunks, b'{"type": "message_stop"}\n\n'),
    Protocol("responses", "/v1/responses",
             {"model": "bench/model", "stream": True, "instructions": SYSTEM,
              "input": [{"role": "user", "content": [{"type": "input_text",
                                                      "text": QUESTION}]}]},
             responses_chunks, RESPONSES_END),
)}
CHAT = PROTOCOLS["chat"]


def serve_upstream(port: int, ttft: float, count: int, cadence: float) -> None:
    replies = {protocol.path: protocol.chunks(count) for protocol in PROTOCOLS.values()}

    async def reply(request: web.Request) -> web.StreamResponse:
        await request.read()
        chunks = replies[request.path]
        await asyncio.sleep(ttft)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for number, data in enumerate(chunks):
            if number:
                await asyncio.sleep(cadence)
            await response.write(data)
        await response.write_eof()
        return response

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "bench/model"}]})

    app = web.Application(client_max_size=1024 ** 3)  # stall.py relays bodies of many MB
    for path in replies:
        app.router.add_post(path, reply)
    app.router.add_get("/v1/models", models)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


def serve_floor(port: int, upstream_port: int) -> None:
    """The least a Python relay can do (read, forward, copy chunks back): the floor that the
    gateway's overhead is compared with."""
    base = f"http://127.0.0.1:{upstream_port}"

    async def session_ctx(app: web.Application) -> Any:
        app[SESSION] = aiohttp.ClientSession(auto_decompress=False)
        yield
        await app[SESSION].close()

    async def relay(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        async with request.app[SESSION].post(
                base + request.path, data=body,
                headers={"Content-Type": "application/json"}) as upstream:
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await response.prepare(request)
            while chunk := await upstream.content.readany():
                await response.write(chunk)
            await response.write_eof()
            return response

    async def health(request: web.Request) -> web.Response:
        return web.json_response({"status": "running"})

    app = web.Application()
    app.cleanup_ctx.append(session_ctx)
    for protocol in PROTOCOLS.values():
        app.router.add_post(protocol.path, relay)
    app.router.add_get("/", health)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


SESSION = web.AppKey("session", aiohttp.ClientSession)


# ---- processes ---------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def wait_until_up(url: str) -> None:
    async with asyncio.timeout(60), aiohttp.ClientSession() as session:
        while True:
            with contextlib.suppress(aiohttp.ClientError, OSError):
                async with session.get(url) as response:
                    if response.status < 500:
                        return
            await asyncio.sleep(0.1)


def gateway_env(upstream_port: int, mode: str, data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {s.name for s in SETTINGS}}
    env.update({
        "API_BASE_URL": f"http://127.0.0.1:{upstream_port}/v1", "API_KEY": "sk-bench-upstream",
        "MESSAGES_BASE_URL": f"http://127.0.0.1:{upstream_port}/v1",
        "DEFAULT_MODEL": "bench/model", "GATEWAY_SECRET": GATEWAY_KEY, "LOG_LEVEL": "INFO",
        "MEMORY_ENABLED": "false", "PAWWAKE_DATA_DIR": str(data_dir),
    })
    env["DATABASE_ENABLED"] = "false" if mode == "pure" else "true"
    return env


def stop(process: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# ---- load ------------------------------------------------------------------------------

class Payloads:
    """Request bodies, each opening a new conversation (so persistence stores every turn)."""

    def __init__(self, protocol: Protocol = CHAT) -> None:
        self._count = 0
        self._template = json.dumps(protocol.body, ensure_ascii=False).encode()

    def next(self) -> bytes:
        self._count += 1
        return self._template.replace(b"#N#", str(self._count).encode())


async def one_stream(session: aiohttp.ClientSession, url: str, headers: dict[str, str],
                     payloads: Any, end: bytes = CHAT.end) -> float:
    """Send one streaming request; return its time to first token; read it to the end."""
    payload = payloads.next()
    started = time.perf_counter()
    async with session.post(url, data=payload, headers=headers) as response:
        if response.status != 200:
            raise RuntimeError(f"{url} answered {response.status}: {await response.text()}")
        first = await response.content.readany()
        ttft = time.perf_counter() - started
        tail = first
        while chunk := await response.content.readany():
            tail = chunk
        if not tail.endswith(end):
            raise RuntimeError("stream ended early")
    return ttft


async def ttft_pairs(session: aiohttp.ClientSession, targets: dict[str, tuple[str, dict]],
                     payloads: Any, samples: int, end: bytes = CHAT.end
                     ) -> dict[str, list[float]]:
    """Sequential requests, direct and gateway interleaved so both see the same conditions.
    ``payloads`` is anything with ``next() -> bytes``; ``end`` is how its streams end."""
    times: dict[str, list[float]] = {name: [] for name in targets}
    for _ in range(samples):
        for name, (url, headers) in targets.items():
            times[name].append(await one_stream(session, url, headers, payloads, end))
    return times


async def streams_per_second(session: aiohttp.ClientSession, url: str,
                             headers: dict[str, str], payloads: Any, concurrency: int,
                             duration: float, end: bytes = CHAT.end) -> float:
    done = 0
    deadline = time.perf_counter() + duration

    async def worker() -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            await one_stream(session, url, headers, payloads, end)
            done += 1

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return done / (time.perf_counter() - started)


async def sample_rss(pid: int, peak: list[float], stop_event: asyncio.Event) -> None:
    while not stop_event.is_set():
        peak[0] = max(peak[0], rss_mb(pid))
        await asyncio.sleep(0.1)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def stored_counts(data_dir: Path) -> str:
    """Rows the gateway wrote into its embedded database (proof that persistence ran)."""
    pid_file = data_dir / "postgres" / "postmaster.pid"
    if not pid_file.exists():
        return "-"
    import psycopg2

    lines = pid_file.read_text().splitlines()
    conn = psycopg2.connect(host=lines[4], port=lines[3], user="postgres", dbname="postgres")
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT (SELECT count(*) FROM conversations),"
                        " (SELECT count(*) FROM token_usage)")
            messages, usage = cur.fetchone()
    finally:
        conn.close()
    return f"{messages} messages, {usage} usage rows"


def start_gateway(mode: str, port: int, upstream_port: int, data_dir: Path
                  ) -> subprocess.Popen[bytes]:
    if mode == "floor":
        return subprocess.Popen([sys.executable, __file__, "--serve-floor", str(port),
                                 "--upstream-port", str(upstream_port)])
    with (data_dir / "gateway.log").open("wb") as log_file:
        return subprocess.Popen([sys.executable, "pawwake.py", "--host", "127.0.0.1",
                                 "--port", str(port)], cwd=ROOT, stdout=log_file,
                                stderr=subprocess.STDOUT,
                                env=gateway_env(upstream_port, mode, data_dir))


async def measure(mode: str, pid: int, port: int, upstream_port: int,
                  args: argparse.Namespace, protocol: Protocol = CHAT) -> dict[str, Any]:
    await wait_until_up(f"http://127.0.0.1:{port}/")
    load = os.getloadavg()[0]
    payloads = Payloads(protocol)
    end = protocol.end
    gateway_url = f"http://127.0.0.1:{port}{protocol.path}"
    direct_url = f"http://127.0.0.1:{upstream_port}{protocol.path}"
    json_headers = {"Content-Type": "application/json"}
    targets = {"direct": (direct_url, json_headers),
               "gateway": (gateway_url, {**json_headers, "X-Gateway-Key": GATEWAY_KEY})}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        await ttft_pairs(session, targets, payloads, 10, end)  # warm up both paths
        await asyncio.sleep(0.5)
        idle_rss = rss_mb(pid)
        times = await ttft_pairs(session, targets, payloads, args.samples, end)
        rates: dict[tuple[str, int], float] = {}
        peak = [0.0]
        for concurrency in CONCURRENCY:
            for name, (url, headers) in targets.items():
                stop_event = asyncio.Event()
                sampler = asyncio.create_task(sample_rss(pid, peak, stop_event))
                rates[name, concurrency] = await streams_per_second(
                    session, url, headers, payloads, concurrency, args.duration, end)
                stop_event.set()
                await sampler
                await asyncio.sleep(0.3)
    direct, gateway = times["direct"], times["gateway"]
    return {"mode": mode, "protocol": protocol.name, "load": load, "idle_rss": idle_rss, "loaded_rss": peak[0], "rates": rates,
            "ttft": {name: (statistics.median(v) * 1000, percentile(v, 0.95) * 1000)
                     for name, v in times.items()},
            "overhead": ((statistics.median(gateway) - statistics.median(direct)) * 1000,
                         (percentile(gateway, 0.95) - percentile(direct, 0.95)) * 1000),
            "paired_median": statistics.median(
                g - d for g, d in zip(gateway, direct, strict=True)) * 1000}


def print_table(results: list[dict[str, Any]], args: argparse.Namespace,
                protocol: Protocol = CHAT) -> None:
    """One protocol's table: a column per mode."""
    sys.stdout.write(
        f"\nprotocol: {protocol.name}; fake provider: TTFT {args.ttft * 1000:.0f} ms, "
        f"{args.chunks} chunks every {args.cadence * 1000:.0f} ms; {args.samples} sequential "
        f"samples; {args.duration:.0f} s per throughput run; {os.cpu_count()} CPUs\n\n")
    header = ("mode", "TTFT p50 direct/gw", "TTFT p95 direct/gw", "overhead p50", "overhead p95",
              "paired p50", *(f"streams/s @{c} direct/gw (ratio)" for c in CONCURRENCY),
              "RSS idle", "RSS loaded", "stored", "load average at start")
    rows = []
    for r in results:
        rows.append((
            r["mode"],
            f"{r['ttft']['direct'][0]:.1f} / {r['ttft']['gateway'][0]:.1f} ms",
            f"{r['ttft']['direct'][1]:.1f} / {r['ttft']['gateway'][1]:.1f} ms",
            f"{r['overhead'][0]:.2f} ms", f"{r['overhead'][1]:.2f} ms",
            f"{r['paired_median']:.2f} ms",
            *(f"{r['rates']['direct', c]:.1f} / {r['rates']['gateway', c]:.1f} "
              f"({r['rates']['gateway', c] / r['rates']['direct', c]:.0%})"
              for c in CONCURRENCY),
            f"{r['idle_rss']:.0f} MB", f"{r['loaded_rss']:.0f} MB", r["stored"],
            f"{r['load']:.2f}"))
    for number, name in enumerate(header):
        sys.stdout.write(f"{name:<36}" + "".join(f"{row[number]:<28}" for row in rows) + "\n")
    sys.stdout.flush()


def measure_mode(mode: str, upstream_port: int, args: argparse.Namespace,
                 protocol: Protocol) -> dict[str, Any]:
    """One mode for one protocol, with a fresh gateway (so RSS and stored rows are its own)."""
    port = free_port()
    data_dir = Path(tempfile.mkdtemp(prefix=f"pawwake-bench-{mode}-"))
    gateway = start_gateway(mode, port, upstream_port, data_dir)
    try:
        result = asyncio.run(measure(mode, gateway.pid, port, upstream_port, args, protocol))
        time.sleep(1.0)  # after-reply writes of the last streams
        result["stored"] = stored_counts(data_dir)
        return result
    finally:
        stop(gateway)
        shutil.rmtree(data_dir, ignore_errors=True)


def main(args: argparse.Namespace) -> None:
    upstream_port = free_port()
    upstream = subprocess.Popen([sys.executable, __file__, "--serve-upstream",
                                 str(upstream_port), "--ttft", str(args.ttft), "--chunks",
                                 str(args.chunks), "--cadence", str(args.cadence)])
    try:
        asyncio.run(wait_until_up(f"http://127.0.0.1:{upstream_port}/v1/models"))
        for protocol in args.protocols:
            print_table([measure_mode(mode, upstream_port, args, protocol)
                         for mode in args.modes], args, protocol)
    finally:
        stop(upstream)


def protocol_list(value: str) -> list[Protocol]:
    try:
        return [PROTOCOLS[name.strip()] for name in value.split(",")]
    except KeyError as error:
        raise argparse.ArgumentTypeError(
            f"unknown protocol {error}; choose from {', '.join(PROTOCOLS)}") from None


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--duration", type=float, default=6.0)
    parser.add_argument("--ttft", type=float, default=0.05)
    parser.add_argument("--chunks", type=int, default=20)
    parser.add_argument("--cadence", type=float, default=0.01)
    parser.add_argument("--modes", type=lambda v: v.split(","),
                        default=["floor", "pure", "persist"],
                        help="floor (a bare aiohttp relay, for reference), pure, persist")
    parser.add_argument("--protocols", type=protocol_list, default=[CHAT],
                        help="comma-separated, each measured in turn: chat "
                             "(/v1/chat/completions), messages (/v1/messages), responses "
                             "(/v1/responses); default chat")
    parser.add_argument("--serve-upstream", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--serve-floor", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--upstream-port", type=int, default=None, help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.serve_floor:
        serve_floor(arguments.serve_floor, arguments.upstream_port)
    elif arguments.serve_upstream:
        serve_upstream(arguments.serve_upstream, arguments.ttft, arguments.chunks,
                       arguments.cadence)
    else:
        main(arguments)
