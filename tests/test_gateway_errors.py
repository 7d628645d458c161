"""What a client sees when something goes wrong: upstream errors passed through, unreachable
or silent providers, bad input, oversize bodies, and the key checks."""

from __future__ import annotations

import io
import json
import socket

import pytest

from tests.fake_upstream import FakeUpstream, Reply, text_stream
from tests.gateway_support import (
    GATEWAY_KEY,
    GatewayStarter,
    chat_body,
    settle,
    stored_messages,
    usage_rows,
)

UPSTREAM_KEY = "sk-upstream-test-key-0123456789"


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("status", [400, 401, 429, 500, 503])
async def test_upstream_error_status_and_body_reach_the_client_unchanged(
        gateway: GatewayStarter, upstream: FakeUpstream, status: int, stream: bool) -> None:
    error_body = b'{"error":{"message":"quota \xe5\x8d\xa1\xe4\xbd\x8f","code":"x"}}'
    upstream.queue(Reply(status=status, raw_body=error_body, content_type="application/json",
                         headers={"Retry-After": "7"}))
    client = await gateway()
    response = await client.post("/v1/chat/completions", json=chat_body(stream=stream))
    assert response.status == status
    assert await response.read() == error_body
    assert response.headers["Content-Type"] == "application/json"
    assert response.headers["Retry-After"] == "7"
    await settle(client)
    assert await stored_messages(client) == []
    assert await usage_rows(client) == []


@pytest.mark.parametrize("stream", [False, True])
async def test_unreachable_upstream_is_502(gateway: GatewayStarter, stream: bool) -> None:
    client = await gateway(API_BASE_URL=f"http://127.0.0.1:{closed_port()}/v1")
    response = await client.post("/v1/chat/completions", json=chat_body(stream=stream))
    assert response.status == 502
    error = (await response.json())["error"]
    assert error["code"] == "upstream_unreachable"
    assert error["type"] == "api_error"
    assert UPSTREAM_KEY not in json.dumps(error)
    assert await stored_messages(client) == []


async def test_unknown_host_is_502(gateway: GatewayStarter) -> None:
    client = await gateway(API_BASE_URL="http://no-such-host.invalid/v1")
    response = await client.post("/v1/chat/completions", json=chat_body())
    assert response.status == 502
    assert (await response.json())["error"]["code"] == "upstream_unreachable"


@pytest.mark.parametrize("stream", [False, True])
async def test_silent_upstream_before_the_answer_is_504(
        gateway: GatewayStarter, upstream: FakeUpstream, stream: bool) -> None:
    upstream.queue(Reply(head_delay=1.5, chunks=text_stream("late"), body={"late": True}))
    client = await gateway(UPSTREAM_READ_TIMEOUT=0.3)
    response = await client.post("/v1/chat/completions", json=chat_body(stream=stream))
    assert response.status == 504
    assert (await response.json())["error"]["code"] == "upstream_timeout"
    await settle(client)
    assert await stored_messages(client) == []


async def test_silent_upstream_mid_stream_ends_the_stream_and_stores_nothing(
        gateway: GatewayStarter, upstream: FakeUpstream) -> None:
    chunks = text_stream("slow reply", pieces=3)
    upstream.queue(Reply(chunks=chunks, delay=0.0))
    upstream.queue(Reply(chunks=chunks, delay=1.5))
    client = await gateway(UPSTREAM_READ_TIMEOUT=0.3)
    # The first stream is fine: the setting is per silence, not per reply.
    response = await client.post("/v1/chat/completions", json=chat_body("one", stream=True))
    assert await response.read() == b"".join(chunks)
    await settle(client)
    assert len(await stored_messages(client)) == 2
    response = await client.post("/v1/chat/completions", json=chat_body("two", stream=True))
    assert response.status == 200  # headers were already sent when the upstream went quiet
    received = await response.read()
    assert b"upstream_stream_cut" in received
    await settle(client)
    assert [r["content"] for r in await stored_messages(client)] == ["one", "slow reply"]


BAD_BODIES = [
    (b"{not json", "invalid_json"),
    (b"\xff\xfe\x00garbage", "invalid_json"),
    (b'["messages"]', "invalid_body"),
    (b'{"model": "m"}', "missing_messages"),
    (b'{"messages": []}', "invalid_messages"),
    (b'{"messages": "hi"}', "invalid_messages"),
    (b'{"messages": ["hi"]}', "invalid_messages"),
    (b'{"messages": [{"role": "wizard", "content": "hi"}]}', "invalid_messages"),
    (b'{"messages": [{"content": "hi"}]}', "invalid_messages"),
    (b'{"model": 5, "messages": [{"role": "user", "content": "hi"}]}', "invalid_model"),
    (b'{"stream": "yes", "messages": [{"role": "user", "content": "hi"}]}', "invalid_stream"),
]


@pytest.mark.parametrize(("raw", "code"), BAD_BODIES)
async def test_bad_input_is_a_400_in_openai_shape_and_stores_nothing(
        gateway: GatewayStarter, upstream: FakeUpstream, raw: bytes, code: str) -> None:
    client = await gateway()
    response = await client.post("/v1/chat/completions", data=raw,
                                 headers={"Content-Type": "application/json"})
    assert response.status == 400
    error = (await response.json())["error"]
    assert error["code"] == code
    assert error["type"] == "invalid_request_error"
    assert error["message"]
    assert upstream.requests == []
    assert await stored_messages(client) == []


async def test_missing_model_without_default_is_400(gateway: GatewayStarter,
                                                    upstream: FakeUpstream) -> None:
    client = await gateway(DEFAULT_MODEL="")
    response = await client.post("/v1/chat/completions",
                                 json={"messages": [{"role": "user", "content": "hi"}]})
    assert response.status == 400
    assert (await response.json())["error"]["code"] == "missing_model"
    assert upstream.requests == []


async def test_oversize_body_is_413_in_openai_shape(gateway: GatewayStarter,
                                                    upstream: FakeUpstream) -> None:
    client = await gateway(MAX_REQUEST_MB=2)
    huge = json.dumps(chat_body("x" * (2 * 1024 * 1024 + 10))).encode()
    response = await client.post("/v1/chat/completions", data=io.BytesIO(huge),
                                 headers={"Content-Type": "application/json"})
    assert response.status == 413
    error = (await response.json())["error"]
    assert error["code"] == "request_too_large"
    assert upstream.requests == []
    assert await stored_messages(client) == []
    # A long history under the limit goes through whole.
    long_text = "长" * 500_000  # 1.5 MB of UTF-8
    body = json.dumps(chat_body(long_text), ensure_ascii=False).encode()
    response = await client.post("/v1/chat/completions", data=io.BytesIO(body),
                                 headers={"Content-Type": "application/json"})
    assert response.status == 200
    assert upstream.requests[0].body["messages"][-1]["content"] == long_text


async def test_without_a_gateway_secret_requests_are_allowed(gateway: GatewayStarter) -> None:
    client = await gateway(GATEWAY_SECRET="")
    response = await client.post("/v1/chat/completions", json=chat_body())
    assert response.status == 200


@pytest.mark.parametrize(("headers", "query", "status"), [
    ({}, "", 401),
    ({"X-Gateway-Key": "wrong"}, "", 401),
    ({"Authorization": "Bearer wrong"}, "", 401),
    ({"Authorization": GATEWAY_KEY}, "", 401),
    ({}, f"?key={GATEWAY_KEY}", 401),
    ({}, f"?api_key={GATEWAY_KEY}", 401),
    ({"X-Gateway-Key": GATEWAY_KEY}, "", 200),
    ({"Authorization": f"Bearer {GATEWAY_KEY}"}, "", 200),
])
async def test_auth_matrix(gateway: GatewayStarter, upstream: FakeUpstream,
                           headers: dict[str, str], query: str, status: int) -> None:
    client = await gateway(GATEWAY_SECRET=GATEWAY_KEY)
    response = await client.post("/v1/chat/completions" + query, json=chat_body(),
                                 headers=headers)
    assert response.status == status
    if status == 401:
        assert (await response.json())["error"]["type"] == "authentication_error"
        assert upstream.requests == []
    models = await client.get("/v1/models" + query, headers=headers)
    assert models.status == status


async def test_upstream_gets_the_gateway_api_key_never_the_clients(
        gateway: GatewayStarter, upstream: FakeUpstream) -> None:
    client = await gateway(GATEWAY_SECRET=GATEWAY_KEY)
    for stream in (False, True):
        response = await client.post("/v1/chat/completions", json=chat_body(stream=stream),
                                     headers={"Authorization": f"Bearer {GATEWAY_KEY}",
                                              "X-Gateway-Key": GATEWAY_KEY})
        await response.read()
    assert len(upstream.requests) == 2
    for recorded in upstream.requests:
        assert recorded.headers["Authorization"] == f"Bearer {UPSTREAM_KEY}"
        assert all(GATEWAY_KEY not in value for value in recorded.headers.values())
        assert "X-Gateway-Key" not in recorded.headers
