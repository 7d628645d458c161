"""A dead embedded PostgreSQL heals by itself: after ``kill -9`` of the postmaster the
gateway restarts it within seconds, says so in its log, answers ``degraded`` on GET / while it
is away, reconnects its pool, and writes the turns it spooled meanwhile. Real processes."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import psutil
import pytest

from tests.fake_upstream import FakeUpstream
from tests.gateway_process import UNTIL_SECONDS, Gateway, postmaster_pid, postmasters

KEY = "gw-supervision-key-0123456789"
HEADERS = {"X-Gateway-Key": KEY}


@pytest.fixture
def data_dir() -> Iterator[Path]:
    # Not under pytest's temp root (mode 0700 would lock out the server's system user).
    folder = Path(tempfile.mkdtemp(prefix="pawwake-test-supervise-"))
    try:
        yield folder
    finally:
        for process in postmasters(folder / "postgres"):
            process.kill()
        shutil.rmtree(folder, ignore_errors=True)


def sidecar_turn(turn_id: str) -> dict[str, Any]:
    return {"turn_id": turn_id, "session_id": "cc-heal", "source": "claude-code",
            "messages": [{"role": "user", "content": f"问题 {turn_id}"},
                         {"role": "assistant", "content": f"回答 {turn_id}"}]}


async def health(session: aiohttp.ClientSession, gateway: Gateway) -> dict[str, Any]:
    async with session.get(gateway.base + "/") as response:
        assert response.status == 200
        body: dict[str, Any] = await response.json()
        return body


async def test_a_killed_embedded_server_is_restarted_and_everything_resumes(
        data_dir: Path, upstream: FakeUpstream) -> None:
    pgdata = data_dir / "postgres"
    gateway = Gateway(data_dir, 1, API_BASE_URL=upstream.base_url, GATEWAY_SECRET=KEY,
                      DEFAULT_MODEL="test/model-a")
    try:
        ready = await gateway.until_ready()
        assert ready["status"] == "running"
        async with aiohttp.ClientSession(headers=HEADERS) as session:
            async with session.post(gateway.base + "/api/conversations/turn",
                                    json=sidecar_turn("t-1")) as response:
                assert response.status == 201, await response.text()
            dead = postmaster_pid(pgdata)
            assert dead is not None
            os.kill(dead, signal.SIGKILL)
            # While it is away GET / still answers, and says the gateway is degraded.
            seen: list[dict[str, Any]] = []
            async with asyncio.timeout(UNTIL_SECONDS):
                while not seen or seen[-1]["status"] != "degraded":
                    seen.append(await health(session, gateway))
                    await asyncio.sleep(0.05)
                assert seen[-1]["database"] != "ready"
                # A chat meanwhile is answered; its turn waits in the spool.
                async with session.post(gateway.base + "/v1/chat/completions", json={
                        "model": "test/model-a", "user": "chat-heal",
                        "messages": [{"role": "user", "content": "离线时的问题"}]}) as chat:
                    assert chat.status == 200, await chat.text()
                while seen[-1]["status"] == "degraded" or seen[-1]["database"] != "ready":
                    seen.append(await health(session, gateway))
                    await asyncio.sleep(0.05)
            assert all(h["database"] != "ready" for h in seen if h["status"] == "degraded")
            assert seen[-1]["status"] == "running"
            restarted = postmaster_pid(pgdata)
            assert restarted is not None and restarted != dead
            assert psutil.pid_exists(restarted)
            assert [p.pid for p in postmasters(pgdata)] == [restarted]
            # The pool reconnected: the very next write succeeds.
            async with session.post(gateway.base + "/api/conversations/turn",
                                    json=sidecar_turn("t-2")) as response:
                assert response.status == 201, await response.text()
            # The chat answered during the outage is stored once, from the spool.
            async with asyncio.timeout(UNTIL_SECONDS):
                while True:
                    async with session.get(gateway.base + "/api/conversations") as response:
                        listed = await response.json()
                    if (await health(session, gateway))["turn_spool"]["pending"] == 0 and \
                            len(listed["items"]) == 2:
                        break
                    await asyncio.sleep(0.2)
            counts = {s["session_id"]: s["message_count"] for s in listed["items"]}
            assert counts["cc-heal"] == 4
            assert sum(counts.values()) == 6, counts
    finally:
        code = gateway.stop()
    log = gateway.log()
    assert code == 0, log
    assert f"embedded PostgreSQL (pid {dead}) died" in log, log
    assert "embedded PostgreSQL restarted" in log, log
