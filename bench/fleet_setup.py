"""The processes of a fleet run (``bench/fleet.py``), all on loopback: one PostgreSQL (the
embedded one, run standalone), PgBouncer in transaction mode, the gateway replicas, haproxy
in front of them, and the fake providers (chat, memory model, embeddings) in a subprocess."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from aiohttp import web

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.admin_sql import run_autocommit  # noqa: E402
from tests.embedding_server import FakeEmbeddings  # noqa: E402
from tests.fake_upstream import FakeUpstream, Reply, completion_body, text_stream  # noqa: E402
from tests.gateway_process import GatewayProcess, free_port  # noqa: E402
from tests.pgbouncer_support import Bouncer, pgbouncer  # noqa: E402

GATEWAY_KEY = "bench-fleet-gateway-key-0123456789"
CHAT_MODEL = "bench/model"
MEMORY_MODEL = "bench/memory"
TOKEN = re.compile(r"TOKEN-[cs]\d+")
HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"


# ---- the fake providers (a subprocess: the load client's loop stays the client's) ----------

def provider_responder(ttft: float, memory_delay: float) -> Any:
    """Chat: a short streamed reply after ``ttft``. The memory model: after ``memory_delay``
    (a model thinking), one memory per token in the conversation it was shown, so each chat
    makes exactly one memory and a second extraction of the same chat would show."""

    def respond(body: dict[str, Any]) -> Reply:
        if body.get("model") == MEMORY_MODEL:
            prompt = json.dumps(body.get("messages"), ensure_ascii=False)
            tokens = sorted(set(TOKEN.findall(prompt.split("Conversation:")[-1])))
            memories = [{"content": f"用户的代号是 {token}", "importance": 5, "action": "new",
                         "candidate_id": None, "remind_at": None, "source_refs": [1]}
                        for token in tokens]
            answer = json.dumps({"memories": memories}, ensure_ascii=False)
            return Reply(body=completion_body(answer, model=MEMORY_MODEL), delay=memory_delay)
        return Reply(chunks=text_stream("好的，我记住了。还有别的吗？", pieces=3, model=CHAT_MODEL),
                     head_delay=ttft, delay=0.005)

    return respond


def serve_providers(port: int, ttft: float, memory_delay: float) -> None:
    upstream = FakeUpstream(provider_responder(ttft, memory_delay))
    embeddings = FakeEmbeddings(natural_dim=64)
    app = upstream.build_app()
    app.router.add_post("/v1/embeddings", embeddings.embeddings)

    @web.middleware
    async def forget(request: web.Request, handler: Any) -> web.StreamResponse:
        try:
            return await handler(request)
        finally:  # a long run must not keep every request body
            upstream.requests.clear()
            embeddings.requests.clear()
            embeddings.headers.clear()

    app.middlewares.append(forget)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


# ---- haproxy --------------------------------------------------------------------------------

def haproxy_config(fleet_port: int, single_port: int, replicas: list[GatewayProcess]) -> str:
    """Round robin over every replica (health-checked each 0.5 s on ``GET /``; a connection
    refused is retried on another server), and a frontend with the first replica alone."""
    check = "check inter 500ms fall 2 rise 2"
    servers = "\n".join(f"    server r{n} 127.0.0.1:{r.port} {check}"
                        for n, r in enumerate(replicas, 1))
    return f"""global
    maxconn 4096
defaults
    mode http
    timeout connect 2s
    timeout client 120s
    timeout server 120s
    option redispatch
    retries 2
frontend fleet
    bind 127.0.0.1:{fleet_port}
    default_backend replicas
frontend single
    bind 127.0.0.1:{single_port}
    default_backend first
backend replicas
    balance roundrobin
    option httpchk GET /
{servers}
backend first
    server r1 127.0.0.1:{replicas[0].port}
"""


@contextlib.contextmanager
def haproxy(folder: Path, config: str) -> Iterator[subprocess.Popen[bytes]]:
    path = folder / "haproxy.cfg"
    path.write_text(config)
    subprocess.run([HAPROXY, "-c", "-q", "-f", str(path)], check=True)
    process = subprocess.Popen([HAPROXY, "-db", "-f", str(path)], stdout=subprocess.DEVNULL,
                               stderr=(folder / "haproxy.log").open("wb"))
    try:
        time.sleep(0.3)
        assert process.poll() is None, (folder / "haproxy.log").read_text()
        yield process
    finally:
        process.terminate()
        process.wait(10)


# ---- PostgreSQL and PgBouncer ----------------------------------------------------------------

class Database:
    """The embedded PostgreSQL, run standalone, and the poolers in front of it."""

    def __init__(self, folder: Path) -> None:
        from pawwake.db.embedded import start_embedded

        self.server = start_embedded(folder / "pg")
        self.admin("CREATE DATABASE fleet")
        self.uri = self.server.get_uri("fleet")
        self._stack = ExitStack()

    def admin(self, sql: str) -> None:
        run_autocommit(self.server.get_uri(), sql)

    def query(self, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
        import psycopg2

        conn = psycopg2.connect(self.uri)
        try:
            with conn.cursor() as cur:
                cur.execute(sql, params)
                return cur.fetchall()
        finally:
            conn.close()

    def bouncer(self, pool_size: int, port: int | None = None) -> Bouncer:
        """A transaction-mode PgBouncer (``stop_bouncer`` kills it: its replica's path to the
        database is gone until ``bouncer`` starts one on the same port again)."""
        return self._stack.enter_context(pgbouncer(self.server.get_uri(), pool_size=pool_size,
                                                   port=port))

    @staticmethod
    def stop_bouncer(bouncer: Bouncer) -> None:
        bouncer.process.kill()
        bouncer.process.wait()

    def server_connections(self) -> int:
        """Connections the server holds for the fleet's database right now."""
        return int(self.query("SELECT count(*) FROM pg_stat_activity WHERE datname = 'fleet'"
                              " AND pid <> pg_backend_pid()")[0][0])

    def max_connections(self) -> int:
        return int(self.query("SHOW max_connections")[0][0])

    def close(self) -> None:
        from pawwake.db.embedded import stop_embedded

        self._stack.close()
        stop_embedded(self.server)


def replica_settings(dsn: str, provider_url: str, pool_size: int, vectors: str
                     ) -> dict[str, str]:
    return {"DATABASE_URL": dsn, "API_BASE_URL": provider_url, "API_KEY": "sk-bench",
            "DEFAULT_MODEL": CHAT_MODEL, "GATEWAY_SECRET": GATEWAY_KEY,
            "MEMORY_ENABLED": "true", "MEMORY_EXTRACT_INTERVAL": "1",
            "MEMORY_MODEL": MEMORY_MODEL, "EMBEDDING_PROVIDER": "api",
            "EMBEDDING_BASE_URL": provider_url, "EMBEDDING_API_KEY": "sk-bench-embed",
            "EMBEDDING_MODEL": "bench-embed", "EMBEDDING_DIM": "64",
            "VECTOR_BACKEND": vectors, "JOB_WORKERS": "2",
            "DATABASE_POOL_SIZE": str(pool_size), "TRUSTED_PROXIES": "127.0.0.1"}


def start_providers(ttft: float, memory_delay: float) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    process = subprocess.Popen([sys.executable, str(Path(__file__).with_name("fleet.py")),
                                "--serve-providers", str(port), "--ttft", str(ttft),
                                "--memory-delay", str(memory_delay)])
    return process, f"http://127.0.0.1:{port}/v1"
