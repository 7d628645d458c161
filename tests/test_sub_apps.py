"""Each program surface (/api, /import, /v1, /v1/messages, /mcp) is a sub-app that guards and
answers for itself: a missing key, an unknown path, a wrong method or a body over MAX_REQUEST_MB
are answered in that surface's own error envelope; paths outside them are left alone."""

from __future__ import annotations

import io
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from tests.fake_upstream import FakeUpstream
from tests.gateway_support import GATEWAY_KEY, GatewayStarter, chat_body

KEYED = {"X-Gateway-Key": GATEWAY_KEY}


def api_envelope(body: Any, code: str) -> None:
    assert set(body) == {"error"}
    assert body["error"]["code"] == code
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]


def openai_envelope(body: Any, code: str, kind: str = "invalid_request_error") -> None:
    assert set(body["error"]) == {"message", "type", "code", "param"}
    assert (body["error"]["code"], body["error"]["type"]) == (code, kind)


def anthropic_envelope(body: Any, kind: str) -> None:
    assert body["type"] == "error"
    assert body["error"]["type"] == kind and body["error"]["message"]


def jsonrpc_envelope(body: Any) -> None:
    assert body["jsonrpc"] == "2.0" and body["id"] is None
    assert body["error"]["code"] == -32600 and body["error"]["message"]


async def _json(client: TestClient, method: str, path: str, **kwargs: Any
                ) -> tuple[int, Any]:
    response = await client.request(method, path, **kwargs)
    return response.status, await response.json()


async def test_unknown_paths_and_methods_answer_in_each_surface_envelope(
        gateway: GatewayStarter, upstream: FakeUpstream) -> None:
    client = await gateway(GATEWAY_SECRET=GATEWAY_KEY)
    status, body = await _json(client, "GET", "/api/no-such-thing", headers=KEYED)
    assert status == 404
    api_envelope(body, "not_found")
    status, body = await _json(client, "DELETE", "/api/settings", headers=KEYED)
    assert status == 405
    api_envelope(body, "method_not_allowed")
    status, body = await _json(client, "GET", "/import/no-such-thing", headers=KEYED)
    assert status == 404
    api_envelope(body, "not_found")
    status, body = await _json(client, "GET", "/v1/no-such-thing", headers=KEYED)
    assert status == 404
    openai_envelope(body, "not_found")
    status, body = await _json(client, "GET", "/v1/chat/completions", headers=KEYED)
    assert status == 405
    openai_envelope(body, "method_not_allowed")
    status, body = await _json(client, "GET", "/v1/messages", headers=KEYED)
    assert status == 405
    anthropic_envelope(body, "invalid_request_error")
    status, body = await _json(client, "POST", "/v1/messages/no-such-thing", headers=KEYED)
    assert status == 404
    anthropic_envelope(body, "not_found_error")
    status, body = await _json(client, "PUT", "/mcp", headers=KEYED)
    assert status == 405
    jsonrpc_envelope(body)
    assert upstream.requests == []


async def test_a_missing_key_is_refused_in_each_surface_envelope(
        gateway: GatewayStarter, upstream: FakeUpstream) -> None:
    client = await gateway(GATEWAY_SECRET=GATEWAY_KEY)
    status, body = await _json(client, "GET", "/api/settings")
    assert status == 401
    api_envelope(body, "invalid_api_key")
    status, body = await _json(client, "GET", "/import/seed-memories")
    assert status == 401
    api_envelope(body, "invalid_api_key")
    status, body = await _json(client, "POST", "/v1/chat/completions", json=chat_body())
    assert status == 401
    openai_envelope(body, "invalid_api_key", "authentication_error")
    status, body = await _json(client, "POST", "/v1/messages",
                               json={"model": "m", "max_tokens": 5,
                                     "messages": [{"role": "user", "content": "hi"}]})
    assert status == 401
    anthropic_envelope(body, "authentication_error")
    response = await client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert response.status == 401
    assert response.headers["WWW-Authenticate"] == 'Bearer realm="pawwake"'
    jsonrpc_envelope(await response.json())
    assert upstream.requests == []


async def test_health_and_other_root_paths_stay_outside_the_surfaces(
        gateway: GatewayStarter) -> None:
    client = await gateway(GATEWAY_SECRET=GATEWAY_KEY)
    health = await client.get("/")
    assert health.status == 200
    assert (await health.json())["status"] == "running"
    assert (await client.head("/")).status == 200
    for path in ("/no-such-thing", "/apix", "/v1x", "/mcpx"):
        response = await client.get(path)  # no key asked for, aiohttp's own 404
        assert response.status == 404, path
        assert response.content_type == "text/plain", path


@pytest.mark.parametrize(("path", "check"), [
    ("/v1/chat/completions", lambda body: openai_envelope(body, "request_too_large")),
    ("/v1/messages", lambda body: anthropic_envelope(body, "request_too_large")),
    ("/api/conversations/import", lambda body: api_envelope(body, "request_too_large")),
])
async def test_a_body_over_max_request_mb_is_413_in_the_surface_envelope(
        gateway: GatewayStarter, upstream: FakeUpstream, path: str, check: Any) -> None:
    client = await gateway(GATEWAY_SECRET=GATEWAY_KEY, MAX_REQUEST_MB=1)
    status, body = await _json(client, "POST", path, data=io.BytesIO(b"x" * (1024 * 1024 + 10)),
                               headers={**KEYED, "Content-Type": "application/json"})
    assert status == 413
    check(body)
    assert "MAX_REQUEST_MB" in body["error"]["message"]
    assert upstream.requests == []


async def test_a_preflight_to_each_browser_surface_is_answered_without_a_key(
        gateway: GatewayStarter, upstream: FakeUpstream) -> None:
    origin = "https://chat.example.com"
    client = await gateway(GATEWAY_SECRET=GATEWAY_KEY, CORS_ALLOW_ORIGINS=origin)
    preflight = {"Origin": origin, "Access-Control-Request-Method": "POST",
                 "Access-Control-Request-Headers": "content-type, x-api-key"}
    for path in ("/v1/chat/completions", "/v1/messages", "/mcp"):
        response = await client.options(path, headers=preflight)
        assert response.status == 204, path
        assert response.headers["Access-Control-Allow-Origin"] == origin, path
    api = await client.options("/api/settings", headers=preflight)
    assert "Access-Control-Allow-Origin" not in api.headers
    assert upstream.requests == []
