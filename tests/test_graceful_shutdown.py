"""SIGTERM with replies in flight (a redeploy): the gateway stops accepting, lets streams run
on for SHUTDOWN_GRACE_SECONDS, then ends each one still open with an error event in its own
protocol's dialect, logged as shutdown, and keeps what was said as an incomplete turn. Real
gateway process, real SIGTERM, real streams on all three protocols."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import psycopg2
import pytest

from tests import fake_anthropic, fake_responses
from tests.fake_anthropic import FakeAnthropic
from tests.fake_responses import FakeResponses
from tests.fake_upstream import FakeUpstream, Reply, on_loopback, text_stream
from tests.gateway_process import Gateway

KEY = "gw-graceful-key-0123456789"
HEADERS = {"X-Gateway-Key": KEY}
GRACE = 3


@pytest.fixture
async def anthropic_upstream(aiohttp_server: Any) -> FakeAnthropic:
    return await on_loopback(FakeAnthropic(), aiohttp_server)


@pytest.fixture
async def responses_upstream(aiohttp_server: Any) -> FakeResponses:
    return await on_loopback(FakeResponses(), aiohttp_server)


def last_event(body: bytes) -> tuple[str | None, Any]:
    """The last SSE event of a body: (event name, parsed data)."""
    blocks = [b for b in body.decode().split("\n\n") if b.strip()]
    name = None
    data = ""
    for line in blocks[-1].splitlines():
        if line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data += line[5:].strip()
    return name, json.loads(data) if data != "[DONE]" else data


async def open_stream(session: aiohttp.ClientSession, url: str, body: dict[str, Any]
                      ) -> tuple[aiohttp.ClientResponse, bytes]:
    response = await session.post(url, json=body)
    assert response.status == 200, await response.text()
    first = await response.content.readany()  # the reply has begun
    return response, first


async def test_sigterm_lets_streams_finish_then_ends_the_rest_in_their_dialect(
        tmp_path: Path, database_url: str, upstream: FakeUpstream,
        anthropic_upstream: FakeAnthropic, responses_upstream: FakeResponses) -> None:
    never = asyncio.Event()  # the provider holds these streams open
    soon = asyncio.Event()  # this one finishes within the grace
    upstream.queue(Reply(chunks=text_stream("马上就说完的回复", pieces=3), gate=soon,
                         gate_after=2))
    upstream.queue(Reply(chunks=text_stream("一直没说完的回复", pieces=3), gate=never,
                         gate_after=2))
    anthropic_upstream.queue(fake_anthropic.Reply(
        chunks=fake_anthropic.message_stream([{"type": "text", "text": "说不完的故事"}]),
        gate=never, gate_after=4))
    responses_upstream.replies.append(fake_responses.Reply(
        chunks=fake_responses.text_events("说不完的回答"), gate=never, gate_after=2))
    gateway = Gateway(tmp_path / "gateway", 1, DATABASE_URL=database_url,
                      API_BASE_URL=upstream.base_url, GATEWAY_SECRET=KEY,
                      MESSAGES_BASE_URL=anthropic_upstream.base_url,
                      RESPONSES_BASE_URL=responses_upstream.base_url,
                      DEFAULT_MODEL="test/model-a", SHUTDOWN_GRACE_SECONDS=str(GRACE))
    try:
        await gateway.until_ready()
        async with aiohttp.ClientSession(headers=HEADERS) as session:
            chat = gateway.base + "/v1/chat/completions"
            finishing, _ = await open_stream(session, chat, {
                "model": "test/model-a", "stream": True, "user": "s-finishing",
                "messages": [{"role": "user", "content": "说完"}]})
            held_chat, _ = await open_stream(session, chat, {
                "model": "test/model-a", "stream": True, "user": "s-held",
                "messages": [{"role": "user", "content": "讲个很长的故事"}]})
            held_messages, _ = await open_stream(session, gateway.base + "/v1/messages", {
                "model": "claude-sonnet-4-5", "max_tokens": 100, "stream": True,
                "metadata": {"user_id": "s-messages"},
                "messages": [{"role": "user", "content": "讲个故事"}]})
            held_responses, _ = await open_stream(session, gateway.base + "/v1/responses", {
                "model": "test/model-a", "stream": True, "input": "讲个笑话",
                "prompt_cache_key": "s-responses"})
            gateway.terminate()
            await asyncio.sleep(0.5)
            with pytest.raises((aiohttp.ClientConnectionError, OSError)):
                async with session.get(gateway.base + "/") as refused:
                    await refused.read()  # no new request is taken once shutdown began
            soon.set()
            rests = await asyncio.gather(*(response.read() for response in (
                finishing, held_chat, held_messages, held_responses)))
        code = await asyncio.to_thread(gateway.process.wait, GRACE + 30)
    finally:
        never.set()
        if gateway.process.poll() is None:
            gateway.kill()
    log = gateway.log()
    assert code == 0, log
    finished, chat_cut, messages_cut, responses_cut = rests
    assert last_event(finished) == (None, "[DONE]")
    assert b"finish_reason" in finished
    name, data = last_event(chat_cut)
    assert name is None and data["error"]["code"] == "server_shutdown", chat_cut
    assert b"[DONE]" not in chat_cut
    name, data = last_event(messages_cut)
    assert name == "error" and data["type"] == "error", messages_cut
    assert data["error"]["type"] == "overloaded_error"
    assert b"message_stop" not in messages_cut
    name, data = last_event(responses_cut)
    assert name == "error" and data["type"] == "error" and data["code"] == "server_shutdown"
    assert log.count("stream ended by shutdown") == 3, log
    assert "client went away" not in log, log
    # What was said is kept: the finished turn whole, the three cut ones as incomplete (the
    # Responses capture reads its text from the terminal event, so only its question).
    conn = psycopg2.connect(database_url)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT session_id, role, content, metadata FROM conversations"
                        " ORDER BY id")
            rows = cur.fetchall()
    finally:
        conn.close()
    assistants = {r[0]: r for r in rows if r[1] == "assistant"}
    assert assistants["s-finishing"][2] == "马上就说完的回复"
    assert not assistants["s-finishing"][3].get("incomplete")
    cut = [r for r in rows if r[1] == "user" and r[3].get("incomplete")]
    assert sorted(r[2] for r in cut) == sorted(["讲个很长的故事", "讲个故事", "讲个笑话"]), rows
    assert assistants["s-held"][2] == "一直没" and assistants["s-held"][3]["incomplete"]
