"""Read your writes: a follow-up sent the moment [DONE] arrives sees the previous turn, also
when the two requests reach two gateway apps on one database; and within one process right
after the finish_reason."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from pawwake.services import services_of
from tests.fake_upstream import FakeUpstream
from tests.gateway_support import GatewayStarter
from tests.partition_support import CLAUDE, PARTITION
from tests.turn_support import DONE, FINISH, production_server, stop_at, turn_rows

TURNS = 20
SESSION = {"X-Session-Id": "s-ryw"}


def texts(messages: list[dict[str, Any]]) -> list[str]:
    out = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(part.get("text", "") for part in content)
        if message.get("role") in ("user", "assistant"):
            out.append(str(content).rsplit("\n\n", 1)[-1])  # drop the time note
    return out


@pytest.mark.parametrize("partition", [True, False], ids=["partition", "plain"])
async def test_follow_ups_zero_ms_apart_across_two_gateways_see_every_turn(
        gateway: GatewayStarter, upstream: FakeUpstream, partition: bool) -> None:
    settings = {**PARTITION, "CACHE_PARTITION_X": 50} if partition else {}
    model = CLAUDE if partition else "test/model-a"
    apps = [gateway.build(**settings), gateway.build(**settings)]
    async with production_server(apps[0]) as first, production_server(apps[1]) as second, \
            aiohttp.ClientSession() as session:
        history: list[dict[str, Any]] = []
        for number in range(TURNS):
            upstream.reply_text(f"答{number}")
            question = {"role": "user", "content": f"问{number}"}
            messages = [question] if partition else [*history, question]
            await stop_at(session, (first, second)[number % 2],
                          {"model": model, "stream": True, "messages": messages}, DONE, SESSION)
            history += [question, {"role": "assistant", "content": f"答{number}"}]
        for number, request in enumerate(upstream.requests[-TURNS:]):
            expected = [text for n in range(number) for text in (f"问{n}", f"答{n}")]
            assert texts(request.body["messages"]) == [*expected, f"问{number}"], number
        for app in apps:
            await services_of(app).tasks.drain()
        rows = await turn_rows(apps[0])  # partition mode stores in its active thread
        assert [r["content"] for r in rows] == [m["content"] for m in history]


async def test_a_follow_up_right_after_the_finish_reason_waits_for_the_store(
        gateway: GatewayStarter, upstream: FakeUpstream) -> None:
    app = gateway.build(**{**PARTITION, "CACHE_PARTITION_X": 50})
    async with production_server(app) as url, aiohttp.ClientSession() as session:
        for number in range(TURNS):
            upstream.reply_text(f"答{number}")
            await stop_at(session, url, {"model": CLAUDE, "stream": True, "messages": [
                {"role": "user", "content": f"问{number}"}]}, FINISH, SESSION)
        for number, request in enumerate(upstream.requests[-TURNS:]):
            expected = [text for n in range(number) for text in (f"问{n}", f"答{n}")]
            assert texts(request.body["messages"]) == [*expected, f"问{number}"], number
        await services_of(app).tasks.drain()
