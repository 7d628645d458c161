"""A reply whose upstream stream reached its end is stored whatever the client does after:
one-shot scripts hang up at the finish_reason while the provider's usage chunk is still on
its way, or right after [DONE]. Both ways a server can notice (handler cancelled in the test
server, ConnectionResetError under ``run_app``)."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest

from pawwake.services import services_of
from tests.fake_upstream import FakeUpstream, Reply, text_stream
from tests.gateway_support import GatewayStarter
from tests.turn_support import DONE, FINISH, production_server, stop_at, turn_rows, usage_count

TRIES = 100
USAGE_CHUNK = 5  # text_stream(pieces=3): role, 3 pieces, finish, usage, [DONE]


@asynccontextmanager
async def served(gateway: GatewayStarter, mode: str) -> Any:
    app = gateway.build()
    if mode == "production":
        async with production_server(app) as url:
            yield app, url
    else:
        client = await gateway.start(app)
        yield app, str(client.make_url("")).rstrip("/")


def body(number: int) -> dict[str, Any]:
    return {"model": "test/model-a", "stream": True,
            "messages": [{"role": "user", "content": f"question {number}"}]}


@pytest.mark.parametrize("mode", ["test_server", "production"])
async def test_hanging_up_at_finish_reason_before_the_usage_keeps_every_turn(
        gateway: GatewayStarter, upstream: FakeUpstream, mode: str) -> None:
    async with served(gateway, mode) as (app, url), aiohttp.ClientSession() as session:
        for number in range(TRIES):
            usage_sent = asyncio.Event()  # the usage chunk waits until the client hung up
            upstream.queue(Reply(chunks=text_stream(f"answer {number}"), gate=usage_sent,
                                 gate_after=USAGE_CHUNK))
            seen = await stop_at(session, url, body(number), FINISH,
                                 {"X-Session-Id": f"s{number}"})
            assert FINISH in seen and DONE not in seen
            usage_sent.set()
        await services_of(app).tasks.drain()
        rows = await turn_rows(app)
        replies = [r for r in rows if r["role"] == "assistant"]
        assert len(replies) == TRIES
        assert all(not r["metadata"].get("incomplete") for r in rows)
        assert sorted(r["content"] for r in replies) == sorted(
            f"answer {n}" for n in range(TRIES))
        assert await usage_count(app) == TRIES


@pytest.mark.parametrize("mode", ["test_server", "production"])
async def test_hanging_up_right_after_done_keeps_every_turn(
        gateway: GatewayStarter, upstream: FakeUpstream, mode: str) -> None:
    async with served(gateway, mode) as (app, url), aiohttp.ClientSession() as session:
        for number in range(TRIES):
            upstream.reply_text(f"answer {number}")
            seen = await stop_at(session, url, body(number), DONE,
                                 {"X-Session-Id": f"s{number}"})
            assert DONE in seen
        await services_of(app).tasks.drain()
        rows = await turn_rows(app)
        assert len([r for r in rows if r["role"] == "assistant"]) == TRIES
        assert all(not r["metadata"].get("incomplete") for r in rows)
        assert await usage_count(app) == TRIES


async def test_a_finished_reply_whose_usage_never_comes_is_stored_after_the_drain_bound(
        gateway: GatewayStarter, upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch
        ) -> None:
    from pawwake.relay.turn import ChatTurn

    monkeypatch.setattr(ChatTurn, "drain_seconds", 0.2)
    never = asyncio.Event()
    upstream.queue(Reply(chunks=text_stream("whole answer"), gate=never, gate_after=USAGE_CHUNK))
    try:
        async with served(gateway, "test_server") as (app, url), \
                aiohttp.ClientSession() as session:
            await stop_at(session, url, body(0), FINISH)
            await services_of(app).tasks.drain()
            rows = await turn_rows(app)
            assert [(r["role"], r["content"], r["metadata"]) for r in rows] == [
                ("user", "question 0", {}),
                ("assistant", "whole answer", {"finish_reason": "stop"})]
            assert await usage_count(app) == 0
    finally:
        never.set()
