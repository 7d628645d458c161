"""The database-kill fault run: the embedded PostgreSQL is killed mid-load; does it heal?

    python bench/faults.py --mode database-kill [--chats 200] [--sidecar 200] [--kills 2]

A real gateway process (``pawwake.py``) on its own embedded PostgreSQL (no DATABASE_URL, a
temporary data folder), a fake provider and memory model (``faults.serve_upstream``), all on
loopback. Streamed chats with memory on (each its own session and token; clients hang up at
random points, as in the faults mode) and sidecar turns (``POST /api/conversations/turn``,
retried on 503 or a refused connection the way the hooks' local spool does) run together;
meanwhile the postmaster is killed with ``kill -9`` (its pid is the first line of
``postmaster.pid``), ``--kills`` times, a few seconds apart. The gateway is never restarted.

Printed: for each kill, the seconds until ``GET /`` says ``running`` again; sidecar answers
503 meanwhile; chat turns and sidecar turns expected, stored, lost and duplicated; memories
expected and extracted; jobs not done at the end; whether the gateway process is the one that
started. Bounded: every wait has a deadline. Never run by the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import faults  # noqa: E402
from bench.overhead import free_port, gateway_env, stop, wait_until_up  # noqa: E402

KEY = faults.GATEWAY_KEY
SIDECAR_DEADLINE_SECONDS = 120.0  # a hook's spool keeps a turn far longer; the run is bounded


class SidecarTurn:
    """One turn a sidecar hook sends, with the number of answers it got on the way."""

    def __init__(self, number: int) -> None:
        self.number = number
        self.turn_id = f"side-{number}"
        self.session = f"side-{number % 20}"
        self.stored = False
        self.unavailable = 0  # 503 answers (the database away)
        self.refused = 0  # connection errors

    def body(self) -> dict[str, Any]:
        return {"turn_id": self.turn_id, "session_id": self.session, "source": "claude-code",
                "messages": [{"role": "user", "content": f"第 {self.number} 个问题"},
                             {"role": "assistant", "content": f"第 {self.number} 个回答"}]}


async def send_sidecar(session: aiohttp.ClientSession, base: str, turn: SidecarTurn) -> None:
    deadline = time.monotonic() + SIDECAR_DEADLINE_SECONDS
    delay = 0.2
    while time.monotonic() < deadline:
        try:
            async with session.post(base + "/api/conversations/turn", json=turn.body(),
                                    headers={"X-Gateway-Key": KEY},
                                    timeout=aiohttp.ClientTimeout(total=20)) as response:
                if response.status in (200, 201):
                    turn.stored = True
                    return
                if response.status == 503:
                    turn.unavailable += 1
                else:
                    return  # a refusal the hook would keep as rejected: counted as lost
        except (aiohttp.ClientError, OSError, TimeoutError):
            turn.refused += 1
        await asyncio.sleep(delay)
        delay = min(2.0, delay * 2)


async def run_sidecars(base: str, turns: list[SidecarTurn], concurrency: int,
                       pause: float) -> None:
    queue = list(turns)

    async def worker(session: aiohttp.ClientSession) -> None:
        while queue:
            await send_sidecar(session, base, queue.pop(0))
            await asyncio.sleep(pause)

    async with aiohttp.ClientSession() as session:
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))


def postmaster_pid(pgdata: Path) -> int | None:
    with contextlib.suppress(OSError, IndexError, ValueError):
        return int((pgdata / "postmaster.pid").read_text().splitlines()[0])
    return None


def dsn_of(pgdata: Path) -> str:
    """The embedded server's socket, as its postmaster.pid names it."""
    socket_dir = (pgdata / "postmaster.pid").read_text().splitlines()[4].strip()
    return f"postgresql://postgres:@/postgres?host={socket_dir}"


async def health(session: aiohttp.ClientSession, base: str) -> dict[str, Any]:
    try:
        async with session.get(base + "/", timeout=aiohttp.ClientTimeout(total=5)) as response:
            body: dict[str, Any] = await response.json()
            return body
    except (aiohttp.ClientError, OSError, TimeoutError, ValueError):
        return {}


async def kill_and_time(base: str, pgdata: Path, deadline: float) -> tuple[int, float | None]:
    """kill -9 the postmaster; seconds until GET / says running again (None: never)."""
    pid = postmaster_pid(pgdata)
    assert pid is not None, "no postmaster.pid"
    os.kill(pid, signal.SIGKILL)
    killed = time.monotonic()
    async with aiohttp.ClientSession() as session:
        seen_degraded = False
        while time.monotonic() - killed < deadline:
            state = await health(session, base)
            if state.get("status") == "degraded":
                seen_degraded = True
            if seen_degraded and state.get("status") == "running" \
                    and postmaster_pid(pgdata) not in (None, pid):
                return pid, time.monotonic() - killed
            await asyncio.sleep(0.05)
    return pid, None


def start_gateway(port: int, upstream_port: int, data_dir: Path) -> subprocess.Popen[bytes]:
    env = gateway_env(upstream_port, "persist", data_dir)
    env.pop("DATABASE_URL", None)  # the embedded server, which the gateway supervises
    env.update({"MEMORY_ENABLED": "true", "MEMORY_EXTRACT_INTERVAL": "1",
                "MEMORY_MODEL": "bench/memory", "MEMORY_VECTOR_ENABLED": "false",
                "GATEWAY_SECRET": KEY, "JOB_WORKERS": "2",
                "XDG_RUNTIME_DIR": str(data_dir / "run")})
    (data_dir / "run").mkdir(parents=True, exist_ok=True)
    log_file = (data_dir / "gateway.log").open("ab")
    return subprocess.Popen([sys.executable, "pawwake.py", "--host", "127.0.0.1",
                             "--port", str(port)], cwd=ROOT, stdout=log_file,
                            stderr=subprocess.STDOUT, env=env)


def main(args: argparse.Namespace) -> None:
    rng = random.Random(args.seed)
    plans = [faults.Plan(n, rng) for n in range(args.chats)]
    sidecars = [SidecarTurn(n) for n in range(args.sidecar)]
    # Outside /root and /tmp's private folders: the server runs as its own system user.
    work = Path(tempfile.mkdtemp(prefix="pawwake-dbkill-"))
    data_dir = work / "gateway"
    data_dir.mkdir()
    pgdata = data_dir / "postgres"
    upstream_port, port = free_port(), free_port()
    base = f"http://127.0.0.1:{port}"
    upstream = subprocess.Popen([sys.executable, faults.__file__, "--serve-upstream",
                                 str(upstream_port), "--memory-delay", str(args.memory_delay)])
    gateway = start_gateway(port, upstream_port, data_dir)
    first_pid = gateway.pid
    heals: list[tuple[int, float | None]] = []
    try:
        asyncio.run(wait_until_up(f"http://127.0.0.1:{upstream_port}/v1/models"))
        asyncio.run(wait_until_up(base + "/"))

        async def load_with_kills() -> None:
            chats = asyncio.create_task(faults.run_chats(base + "/v1/chat/completions", plans,
                                                         args.concurrency))
            turns = asyncio.create_task(run_sidecars(base, sidecars, args.concurrency,
                                                     args.sidecar_pause))
            for _ in range(args.kills):
                await asyncio.sleep(args.kill_every)
                heals.append(await kill_and_time(base, pgdata, args.heal_wait))
                print(f"postmaster {heals[-1][0]} killed; healed in "
                      f"{heals[-1][1] if heals[-1][1] is None else round(heals[-1][1], 2)} s",
                      flush=True)
            await asyncio.gather(chats, turns)

        asyncio.run(load_with_kills())
        dsn = dsn_of(pgdata)

        def settled() -> bool:
            with urllib.request.urlopen(base + "/", timeout=5) as response:
                state = json.loads(response.read())
            busy = faults.query(dsn, "SELECT 1 FROM jobs WHERE status IN"
                                     " ('pending', 'running') LIMIT 1")
            return bool(state["turn_spool"]["pending"] == 0 and not busy)

        asyncio.run(faults.wait_for(settled, args.job_wait))
        report(plans, sidecars, heals, dsn, gateway, first_pid)
        log = (data_dir / "gateway.log").read_text(errors="replace")
        abandoned = sum(1 for line in log.splitlines()
                        if " chat model=- " in line and "status=499" in line)
        sys.stdout.write(f"chats whose client left before the gateway forwarded them "
                         f"{abandoned} (nothing reached the model: not stored, by design)\n")
        for line in log.splitlines():
            if "embedded PostgreSQL" in line and ("died" in line or "restart" in line
                                                   or "did not start" in line):
                sys.stdout.write("  log: " + line[:200] + "\n")
    finally:
        stop(gateway)
        stop(upstream)
        for process in _postmasters(pgdata):
            with contextlib.suppress(ProcessLookupError):
                os.kill(process, signal.SIGTERM)
        shutil.rmtree(work, ignore_errors=True)


def _postmasters(pgdata: Path) -> list[int]:
    pid = postmaster_pid(pgdata)
    return [pid] if pid is not None else []


def report(plans: list[faults.Plan], sidecars: list[SidecarTurn],
           heals: list[tuple[int, float | None]], dsn: str,
           gateway: subprocess.Popen[bytes], first_pid: int) -> None:
    out = sys.stdout.write
    for number, (pid, seconds) in enumerate(heals, 1):
        out(f"kill {number}: postmaster {pid}; GET / running again after "
            f"{'never' if seconds is None else f'{seconds:.2f} s'}\n")
    out(f"gateway restarted               {'no' if gateway.poll() is None and gateway.pid == first_pid else 'YES'}\n")
    out(f"sidecar answers 503 / refused   {sum(t.unavailable for t in sidecars)} / "
        f"{sum(t.refused for t in sidecars)} (retried, as the hooks' spool does)\n")
    rows = faults.query(dsn, "SELECT turn_id, count(*) FROM conversations"
                             " WHERE source = 'claude-code' AND role = 'user'"
                             " GROUP BY turn_id")
    counted = dict(rows)
    sent = [t for t in sidecars if t.stored]
    out(f"sidecar turns sent / acked      {len(sidecars)} / {len(sent)}\n")
    out(f"sidecar turns stored            {sum(1 for t in sidecars if t.turn_id in counted)}\n")
    out(f"sidecar turns lost              "
        f"{sum(1 for t in sent if t.turn_id not in counted)}\n")
    out(f"sidecar turns duplicated        {sum(1 for c in counted.values() if c > 1)}\n")
    out("chat turns (faults mode's counts):\n")
    faults.report(plans, dsn, jobs_at_kill=0)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sidecar", type=int, default=200, help="sidecar turns (database-kill)")
    parser.add_argument("--sidecar-pause", type=float, default=0.05)
    parser.add_argument("--kills", type=int, default=2, help="postmaster kills (database-kill)")
    parser.add_argument("--kill-every", type=float, default=2.0,
                        help="seconds of load before each kill (database-kill)")
    parser.add_argument("--heal-wait", type=float, default=60.0,
                        help="longest wait for GET / to say running after a kill")
