"""The public-attack mode of ``bench/faults.py``: what a client without a key can do.

    python bench/faults.py --mode public-attack [--phase-seconds 10] [--bombers 8]
                           [--slow-connections 500]

A real gateway process (``pawwake.py``) with a gateway key and a configured dashboard; the
database is off (only the HTTP surface is under attack, and its memory is the gateway's own). A
probe in a process of its own asks ``GET /`` every 50 ms, each time on a new connection (a new
visitor), so the attack's load on the client's loop does not show as the gateway's latency.

Phases, ``--phase-seconds`` each: ``quiet`` (the probe alone); ``gzip bomb`` (``--bombers``
clients post, back to back, a 1 MB gzip body that inflates to 1 GB, to ``/dashboard/login``,
``/dashboard/language`` and ``/v1/chat/completions`` without a key); ``slowloris``
(``--slow-connections`` connections to the public routes, half sending their headers a line a
second, half sending complete headers and then an 8 KB body a byte a second, all kept open to
the end of the phase).

Printed per phase: ``GET /`` p50 / p99 and failed probes, the gateway's resident memory (at the
start, peak, at the end), what the attack got back; and the load average. Targets: ``GET /``
p99 under 100 ms, resident memory bounded (the peak within tens of MB of quiet). Bounded: every
phase ends on time and every connection is closed. Never run by the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import tempfile
import time
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.overhead import (  # noqa: E402
    free_port,
    gateway_env,
    percentile,
    rss_mb,
    stop,
    wait_until_up,
)

BOMB_TARGETS = ("/dashboard/login", "/dashboard/language", "/v1/chat/completions")
SLOW_TARGETS = ("/dashboard/login", "/dashboard/language")
SESSION_SECRET = "bench-session-secret-0123456789-abcdefgh"


def gzip_bomb(inflated_mb: int = 1024) -> bytes:
    """``inflated_mb`` MB of one repeated byte, gzip-compressed: about 1 KB per MB."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b"a" * (1024 * 1024)
    parts = [compressor.compress(block) for _ in range(inflated_mb)]
    parts.append(compressor.flush())
    return b"".join(parts)


@dataclass
class Phase:
    """What one phase measured."""

    name: str
    probes: list[float] = field(default_factory=list)
    probe_errors: int = 0
    kept: list[float] = field(default_factory=list)  # GET / on one kept-alive connection
    kept_errors: int = 0
    control: list[float] = field(default_factory=list)  # GET / of a bare aiohttp server
    control_errors: int = 0
    rss_start: float = 0.0
    rss_peak: float = 0.0
    rss_end: float = 0.0
    cpu_seconds: float = 0.0  # the gateway's own CPU time during the phase
    outcomes: Counter[str] = field(default_factory=Counter)

    def line(self) -> str:
        attack = ", ".join(f"{key} {count}" for key, count in sorted(self.outcomes.items()))
        return (f"{self.name:<11}{timing(self.probes, self.probe_errors)}"
                f"{timing(self.kept, self.kept_errors)}"
                f"{timing(self.control, self.control_errors)}"
                f"{self.rss_start:>9.0f}{self.rss_peak:>8.0f}{self.rss_end:>8.0f}"
                f"{self.cpu_seconds:>7.1f}   {attack}")


def timing(samples: list[float], errors: int) -> str:
    """Count, failures, p50 and p99 in ms, as one column group."""
    if not samples:
        return f"{0:>6}{errors:>5} {'-':>7} {'-':>7}"
    return (f"{len(samples):>6}{errors:>5} {percentile(samples, 0.5) * 1000:7.1f} "
            f"{percentile(samples, 0.99) * 1000:7.1f}")


async def probe(url: str, samples: list[float], failures: Counter[str],
                stop_event: asyncio.Event, *, keep_alive: bool = False) -> None:
    """Read a probe process's timings of ``GET url`` into ``samples`` until ``stop_event``."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--probe-kept" if keep_alive else "--probe", url,
        stdout=asyncio.subprocess.PIPE)
    assert process.stdout is not None

    async def read() -> None:
        assert process.stdout is not None
        async for line in process.stdout:
            text = line.strip()
            if text == b"error":
                failures[url if not keep_alive else "kept " + url] += 1
            elif text:
                samples.append(float(text))

    reading = asyncio.create_task(read())
    await stop_event.wait()
    process.terminate()
    await process.wait()
    await reading


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time the process has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def sample_rss(pid: int, phase: Phase, stop_event: asyncio.Event) -> None:
    phase.rss_start = phase.rss_peak = rss_mb(pid)
    cpu_start = cpu_seconds(pid)
    while not stop_event.is_set():
        phase.rss_peak = max(phase.rss_peak, rss_mb(pid))
        await asyncio.sleep(0.05)
    phase.rss_end = rss_mb(pid)
    phase.cpu_seconds = cpu_seconds(pid) - cpu_start


async def bomber(base: str, body: bytes, phase: Phase, deadline: float) -> None:
    """Post the bomb to each target in turn until ``deadline``."""
    headers = {"Content-Encoding": "gzip", "Origin": base,
               "Content-Type": "application/x-www-form-urlencoded"}
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        turn = 0
        while time.monotonic() < deadline:
            target = BOMB_TARGETS[turn % len(BOMB_TARGETS)]
            turn += 1
            try:
                async with session.post(base + target, data=body, headers=headers) as response:
                    await response.read()
                    phase.outcomes[str(response.status)] += 1
            except (aiohttp.ClientError, OSError, TimeoutError):
                phase.outcomes["closed mid-send"] += 1


async def slow_client(host: str, port: int, number: int, phase: Phase, deadline: float) -> None:
    """One slowloris connection: headers a line a second (even numbers) or complete headers
    and a body a byte a second (odd), until ``deadline`` or the server answers or closes."""
    target = SLOW_TARGETS[number % len(SLOW_TARGETS)]
    try:
        reader, writer = await asyncio.open_connection(host, port)
    except OSError:
        phase.outcomes["connect failed"] += 1
        return
    outcome = "held to the end"
    try:
        writer.write(f"POST {target} HTTP/1.1\r\nHost: {host}:{port}\r\n".encode())
        if number % 2:
            writer.write(f"Origin: http://{host}:{port}\r\n"
                         "Content-Type: application/x-www-form-urlencoded\r\n"
                         "Content-Length: 8000\r\n\r\n".encode())
        while time.monotonic() < deadline:
            await writer.drain()
            with contextlib.suppress(TimeoutError):
                answer = await asyncio.wait_for(reader.read(1024), 1.0)
                outcome = "answered" if answer else "closed by the gateway"
                break
            writer.write(b"a" if number % 2 else b"X-Slow: 1\r\n")
    except (ConnectionError, OSError):
        outcome = "closed by the gateway"
    finally:
        phase.outcomes[outcome] += 1
        writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await writer.wait_closed()


async def run_phase(name: str, pid: int, base: str, control: str, seconds: float,
                    args: argparse.Namespace, bomb: bytes) -> Phase:
    phase = Phase(name)
    stop_event = asyncio.Event()
    failures: Counter[str] = Counter()
    watchers = [asyncio.create_task(probe(base + "/", phase.probes, failures, stop_event)),
                asyncio.create_task(probe(base + "/", phase.kept, failures, stop_event,
                                          keep_alive=True)),
                asyncio.create_task(probe(control, phase.control, failures, stop_event)),
                asyncio.create_task(sample_rss(pid, phase, stop_event))]
    deadline = time.monotonic() + seconds
    if name == "gzip bomb":
        attackers = [bomber(base, bomb, phase, deadline) for _ in range(args.bombers)]
    elif name == "slowloris":
        host, port = "127.0.0.1", int(base.rsplit(":", 1)[1])
        attackers = [slow_client(host, port, n, phase, deadline)
                     for n in range(args.slow_connections)]
    else:
        attackers = [asyncio.sleep(seconds)]
    await asyncio.gather(*attackers)
    await asyncio.sleep(max(0.0, deadline - time.monotonic()))
    stop_event.set()
    await asyncio.gather(*watchers)
    phase.probe_errors, phase.control_errors = failures[base + "/"], failures[control]
    phase.kept_errors = failures["kept " + base + "/"]
    return phase


def start_gateway(port: int, data_dir: Path) -> subprocess.Popen[bytes]:
    env = gateway_env(free_port(), "pure", data_dir)  # no provider: nothing is forwarded
    env.update({"DASHBOARD_PASSWORD": "bench-dashboard-password",
                "SESSION_SECRET": SESSION_SECRET, "LOG_LEVEL": "ERROR"})
    log_file = (data_dir / "gateway.log").open("ab")
    return subprocess.Popen([sys.executable, "pawwake.py", "--host", "127.0.0.1",
                             "--port", str(port)], cwd=ROOT, stdout=log_file,
                            stderr=subprocess.STDOUT, env=env)


def run(args: argparse.Namespace) -> None:
    """The public-attack mode of bench/faults.py."""
    bomb = gzip_bomb()
    data_dir = Path(tempfile.mkdtemp(prefix="pawwake-attack-"))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    control_port = free_port()
    control = f"http://127.0.0.1:{control_port}/"
    bare = subprocess.Popen([sys.executable, __file__, "--serve-control", str(control_port)])
    gateway = start_gateway(port, data_dir)
    load_before = os.getloadavg()
    try:
        asyncio.run(wait_until_up(base + "/"))
        asyncio.run(wait_until_up(control))
        phases = [asyncio.run(run_phase(name, gateway.pid, base, control, args.phase_seconds,
                                        args, bomb))
                  for name in ("quiet", "gzip bomb", "slowloris")]
        alive = gateway.poll() is None
    finally:
        stop(gateway)
        stop(bare)
    out = sys.stdout.write
    out(f"gzip bomb: {len(bomb) / 1024:.0f} KB on the wire, 1024 MB inflated; "
        f"{args.bombers} bombers; {args.slow_connections} slow connections; "
        f"{args.phase_seconds:g} s per phase\n")
    out(f"{'':<11}{'gateway GET /':^26}{'... kept-alive':^26}{'bare aiohttp GET /':^26}"
        f"{'gateway RSS MB':^25}\n")
    out(f"{'phase':<11}" + f"{'n':>6}{'err':>5} {'p50 ms':>7} {'p99 ms':>7}" * 3
        + f"{'start':>9}{'peak':>8}{'end':>8}{'CPU s':>7}   attack outcomes\n")
    for phase in phases:
        out(phase.line() + "\n")
    out(f"gateway alive at the end: {alive}\n")
    load = " ".join(f"{value:.2f}" for value in load_before)
    load_after = " ".join(f"{value:.2f}" for value in os.getloadavg())
    out(f"load average (1, 5, 15 min): before {load}, after {load_after}\n")


def probe_main(url: str, *, keep_alive: bool) -> None:
    """``--probe URL``: print the seconds each ``GET URL`` took (a new connection each time,
    as a new visitor; ``--probe-kept``: one connection kept alive), every 50 ms, until
    killed."""

    async def once(session: aiohttp.ClientSession) -> str:
        started = time.perf_counter()
        try:
            async with session.get(url) as response:
                await response.read()
        except (aiohttp.ClientError, OSError, TimeoutError):
            return "error"
        return f"{time.perf_counter() - started:.6f}"

    async def loop() -> None:
        connector = aiohttp.TCPConnector(force_close=not keep_alive)
        timeout = aiohttp.ClientTimeout(total=5)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
            while True:
                sys.stdout.write(await once(session) + "\n")
                sys.stdout.flush()
                await asyncio.sleep(0.05)

    with contextlib.suppress(KeyboardInterrupt, BrokenPipeError):
        asyncio.run(loop())


def serve_control(port: int) -> None:
    """``--serve-control PORT``: a bare aiohttp server answering GET / with a little JSON, to
    tell the machine's own latency under the attack's load from the gateway's."""
    from aiohttp import web

    async def root(_request: web.Request) -> web.Response:
        return web.json_response({"status": "running"})

    app = web.Application()
    app.router.add_get("/", root)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--phase-seconds", type=float, default=10.0)
    parser.add_argument("--bombers", type=int, default=8)
    parser.add_argument("--slow-connections", type=int, default=500)


if __name__ == "__main__":
    if sys.argv[1] in ("--probe", "--probe-kept"):
        probe_main(sys.argv[2], keep_alive=sys.argv[1] == "--probe-kept")
    elif sys.argv[1:2] == ["--serve-control"]:
        serve_control(int(sys.argv[2]))
