"""Several gateways on one PostgreSQL, under load and faults: is anything lost or doubled?

    python bench/fleet.py [--chats 1000] [--sidecar-share 0.2] [--replicas 3]
                          [--concurrency 24] [--throughput-chats 300] [--vectors numpy]

Everything on loopback: the embedded PostgreSQL run standalone, PgBouncer in transaction mode
(one for the first replicas, one of its own for the last, so its path to the database can be
cut), ``--replicas`` real gateway processes, haproxy in front (round robin, health checks on
``GET /``), and the fake providers of ``tests/`` in a subprocess: chat (a short stream), a
memory model that answers after ``--memory-delay`` with one memory per chat token, and
embeddings. Every chat and sidecar turn opens its own session and carries a unique token; a
client whose request fails tries again through the balancer, as a person would (a re-sent
chat is a re-roll, stored once).

Phases: the same load through one gateway alone and through the fleet (throughput, same run),
then the fault run: ``--chats`` streamed chats with sidecar turns mixed in, during which a
setting is saved through the first replica (time until every replica serves it), the last
replica's path to the database is cut (its finished turns go to its spool), it is killed with
``kill -9`` while jobs run, its path comes back, and it is started again on the same data
folder (it replays its spool; its jobs were taken over by the others once their lease ran out).
Last, a rolling restart under load: each replica in turn gets SIGTERM, exits, starts again and
is back in the balancer before the next (turns whose client saw a failure are counted).

Printed: turns expected / stored / lost / duplicated, memories expected / extracted /
duplicated, jobs lost, job take-over time, spooled turns replayed, the setting's time to be
seen everywhere, the rolling restart's failed requests, the peak of server connections
against ``max_connections``, throughput of one gateway and of the fleet (served, learned, and
the gateways' CPU time per turn), cores and load average. Bounded: every wait has a deadline.
Never run by the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.fleet_setup import (
    CHAT_MODEL,
    GATEWAY_KEY,
    TOKEN,
    Database,
    haproxy,
    haproxy_config,
    replica_settings,
    serve_providers,
    start_providers,
)
from tests.gateway_process import GatewayProcess, free_port, start_all, stop_all

HEADERS = {"Authorization": f"Bearer {GATEWAY_KEY}"}
ATTEMPTS = 8  # a client tries this often before it gives up on a turn
SETTING = ("MAX_MEMORIES_INJECT", 9)


@dataclass
class Plan:
    """One chat or sidecar turn, its own session, its unique token."""

    number: int
    sidecar: bool
    attempts: int = 0
    ok: bool = False

    @property
    def token(self) -> str:
        return f"TOKEN-{'s' if self.sidecar else 'c'}{self.number}"

    @property
    def session(self) -> str:
        return f"fleet-{self.token}"

    def request(self) -> tuple[str, dict[str, Any]]:
        if self.sidecar:
            return "/api/conversations/turn", {
                "turn_id": f"turn-{self.number}", "session_id": self.session,
                "source": "bench", "messages": [
                    {"role": "user", "content": f"{self.token} 帮我记一下，我的猫叫团子"},
                    {"role": "assistant", "content": "记下了。"}]}
        return "/v1/chat/completions", {
            "model": CHAT_MODEL, "stream": True,
            "messages": [{"role": "user", "content": f"{self.token} 我的猫叫团子，你记住了吗"}]}


class Progress:
    """Turns finished so far in a load run (the fault schedule waits on it)."""

    def __init__(self) -> None:
        self.finished = 0
        self._changed = asyncio.Event()

    def tick(self) -> None:
        self.finished += 1
        self._changed.set()

    async def reach(self, count: float) -> None:
        while self.finished < count:
            self._changed.clear()
            await self._changed.wait()


def make_plans(start: int, count: int, sidecar_share: float) -> list[Plan]:
    every = round(1 / sidecar_share) if sidecar_share > 0 else 0
    return [Plan(n, sidecar=bool(every) and n % every == 0) for n in range(start, start + count)]


async def attempt(http: aiohttp.ClientSession, base: str, plan: Plan) -> bool:
    path, body = plan.request()
    headers = HEADERS if plan.sidecar else {**HEADERS, "X-Session-Id": plan.session}
    try:
        async with http.post(base + path, json=body, headers=headers,
                             timeout=aiohttp.ClientTimeout(total=60)) as response:
            data = await response.read()
            if plan.sidecar:
                return response.status in (200, 201)
            return response.status == 200 and b"data: [DONE]" in data
    except (aiohttp.ClientError, OSError, TimeoutError):
        return False


async def run_load(base: str, plans: list[Plan], concurrency: int, done: Progress,
                   stop: asyncio.Event | None = None) -> float:
    """Every plan until it succeeds (or ``ATTEMPTS`` tries), or until ``stop`` is set (the
    plans not started then are dropped from ``plans``); returns the wall time."""
    queue = list(reversed(plans))

    async def client(http: aiohttp.ClientSession) -> None:
        while queue and not (stop is not None and stop.is_set()):
            plan = queue.pop()
            while plan.attempts < ATTEMPTS and not plan.ok:
                plan.attempts += 1
                plan.ok = await attempt(http, base, plan)
                if not plan.ok:
                    await asyncio.sleep(0.3 * plan.attempts)
            done.tick()

    started = time.monotonic()
    async with aiohttp.ClientSession() as http:
        await asyncio.gather(*(client(http) for _ in range(concurrency)))
    for plan in queue:
        plans.remove(plan)
    return time.monotonic() - started


async def get_json(http: aiohttp.ClientSession, url: str) -> Any:
    async with http.get(url, headers=HEADERS, timeout=aiohttp.ClientTimeout(total=10)) as r:
        return await r.json()


async def setting_seen_after(http: aiohttp.ClientSession, replicas: list[GatewayProcess]
                             ) -> list[float]:
    """Save the setting through the first replica; seconds until each replica serves it."""
    name, value = SETTING
    started = time.monotonic()
    async with http.put(replicas[0].base_url + "/api/settings", headers=HEADERS,
                        json={name: value}) as response:
        assert response.status == 200, await response.text()

    async def seen(replica: GatewayProcess) -> float:
        while time.monotonic() - started < 30:
            with contextlib.suppress(aiohttp.ClientError, OSError, TimeoutError):
                body = await get_json(http, replica.base_url + "/api/settings")
                if any(s["name"] == name and s["value"] == value for s in body["settings"]):
                    return time.monotonic() - started
            await asyncio.sleep(0.05)
        return float("inf")

    return list(await asyncio.gather(*(seen(r) for r in replicas)))


async def until(check: Any, seconds: float, every: float = 0.5) -> float | None:
    """Seconds until ``check()`` (a blocking call, run in a thread) is true; None at the
    deadline."""
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        if await asyncio.to_thread(check):
            return time.monotonic() - started
        await asyncio.sleep(every)
    return None


class Run:
    def __init__(self, args: argparse.Namespace, work: Path) -> None:
        self.args = args
        self.work = work
        self.figures: dict[str, Any] = {"load_before": os.getloadavg()}
        self.peak_connections = 0

    async def sample_connections(self, database: Database) -> None:
        while True:
            with contextlib.suppress(Exception):
                self.peak_connections = max(self.peak_connections,
                                            await asyncio.to_thread(database.server_connections))
            await asyncio.sleep(0.5)

    async def faults(self, database: Database, replicas: list[GatewayProcess],
                     last_bouncer: Any, total: int, done: Progress) -> None:
        """Save a setting, cut the last replica's database path, kill it, bring it back."""
        last = replicas[-1]

        async def at(share: float) -> None:
            await done.reach(share * total)

        async with aiohttp.ClientSession() as http:
            await at(0.2)
            self.figures["setting_seen"] = await setting_seen_after(http, replicas)
            await at(0.3)
            database.stop_bouncer(last_bouncer)
            await at(0.4)
            spooled = 0
            for _ in range(100):  # up to 10 s for a few turns to wait in its spool
                spooled = (await get_json(http, last.base_url + "/"))["turn_spool"]["pending"]
                if spooled >= 5:
                    break
                await asyncio.sleep(0.1)
            self.figures["spooled_at_kill"] = spooled
            running = [row[0] for row in await asyncio.to_thread(
                database.query, "SELECT id FROM jobs WHERE status = 'running'")]
            last.kill()
            killed_at = time.monotonic()
            database.bouncer(self.args.pool_size, port=last_bouncer.port)
            self.figures["running_at_kill"] = len(running)
            await at(0.55)
            last.start()
            await last.until_ready()
            self.figures["restarted_after"] = time.monotonic() - killed_at
            self.figures["spool_replayed_in"] = await self._spool_empty(http, last)

        def taken_over() -> bool:
            if not running:
                return True
            rows = database.query("SELECT count(*) FROM jobs WHERE id = ANY(%s)"
                                  " AND status = 'running'", (running,))
            return rows[0][0] == 0

        waited = await until(taken_over, 150)
        self.figures["jobs_taken_over_in"] = None if waited is None else \
            time.monotonic() - killed_at

    async def _spool_empty(self, http: aiohttp.ClientSession, replica: GatewayProcess
                           ) -> float | None:
        started = time.monotonic()
        while time.monotonic() - started < 60:
            health = await get_json(http, replica.base_url + "/")
            if health["turn_spool"]["pending"] == 0:
                return time.monotonic() - started
            await asyncio.sleep(0.2)
        return None

    async def main(self) -> None:
        args = self.args
        database = Database(self.work)
        providers, provider_url = start_providers(args.ttft, args.memory_delay)
        shared = database.bouncer(args.pool_size * (args.replicas - 1))
        last_bouncer = database.bouncer(args.pool_size)
        dsn = "postgresql://postgres@127.0.0.1:{}/fleet?application_name=pawwake"
        replicas = [GatewayProcess(self.work / f"replica-{n}" / "data", replica_settings(
            dsn.format(last_bouncer.port if n == args.replicas else shared.port), provider_url,
            args.pool_size, args.vectors), name=f"replica-{n}")
            for n in range(1, args.replicas + 1)]
        fleet_port, single_port = free_port(), free_port()
        sampler = asyncio.create_task(self.sample_connections(database))
        try:
            with haproxy(self.work, haproxy_config(fleet_port, single_port, replicas)):
                await self.phases(database, replicas, last_bouncer, fleet_port, single_port)
        finally:
            sampler.cancel()
            stop_all(*replicas)
            providers.terminate()
            providers.wait(10)
            database.close()

    async def throughput(self, database: Database, name: str, port: int, number: int,
                         replicas: list[GatewayProcess]) -> int:
        """Warm up, then the same load as every throughput phase; the queue drains after.
        Also the gateways' CPU time per turn, served and learned (on a shared machine the one
        figure that does not depend on what else runs). Returns the next plan number."""
        args = self.args
        base = f"http://127.0.0.1:{port}"
        warm = make_plans(number, 4 * args.replicas, args.sidecar_share)
        await run_load(base, warm, args.concurrency, Progress())
        await self.drained(database)
        plans = make_plans(number + len(warm), args.throughput_chats, args.sidecar_share)
        cpu_before = cpu_seconds(replicas)
        seconds = await run_load(base, plans, args.concurrency, Progress())
        load = os.getloadavg()
        drained = await self.drained(database)
        served = sum(p.ok for p in plans)
        self.figures[name] = (served / seconds, load,
                              None if drained is None else drained + seconds,
                              (cpu_seconds(replicas) - cpu_before) / max(1, served))
        return number + len(warm) + len(plans)

    async def rolling_restart(self, replicas: list[GatewayProcess], fleet_port: int,
                              plans: list[Plan]) -> None:
        """Under load, each replica in turn: SIGTERM, wait for its exit, start it again, wait
        until it is healthy and back in the balancer, then the next one. Counts the turns
        whose client saw a failure (and tried again) meanwhile."""
        stop = asyncio.Event()

        async def restarts() -> None:
            stops = []
            try:
                await asyncio.sleep(1)
                for replica in replicas:
                    started = time.monotonic()
                    await asyncio.to_thread(replica.stop)
                    stops.append(time.monotonic() - started)
                    replica.start()
                    await replica.until_ready()
                    await asyncio.sleep(2)  # two health checks: back in rotation
            finally:
                stop.set()
            self.figures["rolling_stops"] = stops

        restarting = asyncio.create_task(restarts())
        seconds = await run_load(f"http://127.0.0.1:{fleet_port}", plans,
                                 self.args.concurrency, Progress(), stop)
        await restarting
        self.figures["rolling"] = (len(plans), sum(p.attempts > 1 for p in plans), seconds)

    async def drained(self, database: Database) -> float | None:
        return await until(lambda: not database.query(
            "SELECT 1 FROM jobs WHERE status IN ('pending', 'running') LIMIT 1"), 300)

    async def phases(self, database: Database, replicas: list[GatewayProcess],
                     last_bouncer: Any, fleet_port: int, single_port: int) -> None:
        args = self.args
        await start_all(replicas[0])  # one gateway alone: nobody else takes its jobs
        number = await self.throughput(database, "single", single_port, 0, replicas[:1])
        await start_all(*replicas[1:])
        await asyncio.sleep(2)  # haproxy's checks see the new replicas up
        number = await self.throughput(database, "fleet", fleet_port, number, replicas)
        plans = make_plans(number, args.chats, args.sidecar_share)
        done = Progress()
        faults = asyncio.create_task(self.faults(database, replicas, last_bouncer, len(plans),
                                                 done))
        seconds = await run_load(f"http://127.0.0.1:{fleet_port}", plans, args.concurrency,
                                 done)
        self.figures["fault_run"] = (seconds, os.getloadavg())
        await faults
        rolling = make_plans(number + len(plans), 20 * args.chats, args.sidecar_share)
        await self.rolling_restart(replicas, fleet_port, rolling)
        plans += rolling
        self.figures["jobs_drained_in"] = await self.drained(database)
        self.figures["max_connections"] = database.max_connections()
        self.figures["load_after"] = os.getloadavg()
        self.report(database, plans)

    def report(self, database: Database, plans: list[Plan]) -> None:
        rows = database.query("SELECT session_id, role, count(*) FROM conversations"
                              " WHERE deleted_at IS NULL AND session_id LIKE 'fleet-TOKEN-%%'"
                              " GROUP BY session_id, role")
        counts: dict[str, Counter[str]] = {}
        for session_id, role, count in rows:
            counts.setdefault(session_id, Counter())[role] = count
        wanted = {p.session: p for p in plans}
        expected = [p for p in plans if p.ok]
        complete = [p for p in expected if counts.get(p.session, Counter())["user"] >= 1
                    and counts[p.session]["assistant"] >= 1]
        doubled = [s for s, c in counts.items() if s in wanted and max(c.values()) > 1]
        memories = [TOKEN.search(text).group(0) for (text,) in database.query(  # type: ignore[union-attr]
            "SELECT content FROM memories WHERE content LIKE '%%TOKEN-%%'")
            if TOKEN.search(text)]
        ours = [m for m in memories if f"fleet-{m}" in wanted]
        jobs = dict(database.query("SELECT status, count(*) FROM jobs GROUP BY status"))
        f = self.figures
        out = sys.stdout.write
        cores = len(os.sched_getaffinity(0))
        single, fleet = f["single"][0], f["fleet"][0]
        out(f"cores {cores}; load average before {fmt_load(f['load_before'])}, "
            f"after {fmt_load(f['load_after'])}\n")
        for name, label in (("single", "one gateway"), ("fleet", f"{self.args.replicas} replicas")):
            rate, load, learned, cpu = f[name]
            out(f"throughput, {label:<14} {rate:7.1f} turns/s served (load {fmt_load(load)}); "
                f"all learned {seconds_or_never(learned)} after the first; gateway CPU "
                f"{1000 * cpu:.0f} ms per turn\n")
        out(f"ratio, {self.args.replicas} replicas / one        {fleet / single:.2f}x\n")
        out(f"fault run and rolling restart: {len(plans)} turns "
            f"({sum(p.sidecar for p in plans)} sidecar); the fault run took "
            f"{f['fault_run'][0]:.1f} s (load {fmt_load(f['fault_run'][1])}); client retries "
            f"{sum(p.attempts - 1 for p in plans)}\n")
        out(f"turns expected                {len(expected)} (gave up: "
            f"{len(plans) - len(expected)})\n")
        out(f"turns stored                  {len(complete)}\n")
        out(f"turns lost                    {len(expected) - len(complete)}\n")
        out(f"turns duplicated              {len(doubled)}\n")
        out(f"memories expected             {len(complete)}\n")
        out(f"memories extracted            {len(set(ours) & {p.token for p in complete})}\n")
        out(f"memories duplicated           {len(ours) - len(set(ours))}\n")
        out(f"jobs running at the kill      {f['running_at_kill']}; all done "
            f"{seconds_or_never(f['jobs_taken_over_in'])} after it\n")
        out(f"jobs lost (not done)          {sum(v for k, v in jobs.items() if k != 'done')}"
            f"  {jobs}\n")
        out(f"spooled turns at the kill     {f['spooled_at_kill']}; restarted after "
            f"{f['restarted_after']:.1f} s, spool empty "
            f"{seconds_or_never(f['spool_replayed_in'])} after it was up\n")
        served, retried, rolling_seconds = f["rolling"]
        out(f"rolling restart (SIGTERM, one at a time, under load): {served} turns in "
            f"{rolling_seconds:.1f} s, {retried} saw a failure and were sent again; replicas "
            f"stopped in {', '.join(f'{s:.1f}' for s in f['rolling_stops'])} s\n")
        seen = f["setting_seen"]
        out(f"setting seen by every replica {max(seen):.2f} s  (each: "
            f"{', '.join(f'{s:.2f}' for s in seen)})\n")
        out(f"server connections, peak      {self.peak_connections} of max_connections "
            f"{f['max_connections']} (pool {self.args.pool_size} per replica, PgBouncer "
            f"{self.args.pool_size * (self.args.replicas - 1)} + {self.args.pool_size})\n")


def cpu_seconds(replicas: list[GatewayProcess]) -> float:
    """User and system CPU time the replicas' processes have used so far."""
    import psutil

    total = 0.0
    for replica in replicas:
        assert replica.process is not None
        times = psutil.Process(replica.process.pid).cpu_times()
        total += times.user + times.system
    return total


def fmt_load(load: tuple[float, float, float]) -> str:
    return "/".join(f"{v:.2f}" for v in load)


def seconds_or_never(value: float | None) -> str:
    return "never (deadline)" if value is None else f"{value:.1f} s"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=int, default=1000)
    parser.add_argument("--sidecar-share", type=float, default=0.2)
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=24)
    parser.add_argument("--throughput-chats", type=int, default=300)
    parser.add_argument("--pool-size", type=int, default=8)
    parser.add_argument("--vectors", choices=("numpy", "pgvector"), default="numpy")
    parser.add_argument("--ttft", type=float, default=0.05)
    parser.add_argument("--memory-delay", type=float, default=0.3)
    parser.add_argument("--keep", action="store_true",
                        help="keep the run's folder (logs of every replica, haproxy)")
    parser.add_argument("--serve-providers", type=int, default=None, help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.serve_providers:
        serve_providers(arguments.serve_providers, arguments.ttft, arguments.memory_delay)
    else:
        folder = Path(tempfile.mkdtemp(prefix="pawwake-fleet-"))
        try:
            asyncio.run(Run(arguments, folder).main())
        finally:
            if arguments.keep:
                print(f"logs kept in {folder}")
            else:
                shutil.rmtree(folder, ignore_errors=True)
