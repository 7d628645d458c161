"""CORS on /v1 for chat clients in a browser on another origin; never on /dashboard or /api."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aiohttp import web

from tests.dashboard_support import dashboard_client, login
from tests.fake_upstream import FakeUpstream, Reply, text_stream
from tests.gateway_support import GATEWAY_KEY, GatewayStarter, chat_body, settle

WEB_APP = "https://chat.example.com"
PREFLIGHT = {"Origin": WEB_APP, "Access-Control-Request-Method": "POST",
             "Access-Control-Request-Headers":
                 "authorization, content-type, x-session-id, x-stainless-os"}


def header_set(value: str) -> set[str]:
    return {item.strip().lower() for item in value.split(",") if item.strip()}


def no_cors(response: Any) -> bool:
    return not any(name.lower().startswith("access-control-") for name in response.headers)


async def test_preflight_needs_no_key_and_never_reaches_the_provider(
        gateway: GatewayStarter, upstream: FakeUpstream) -> None:
    client = await gateway(GATEWAY_SECRET=GATEWAY_KEY)
    for path in ("/v1/chat/completions", "/v1/models"):
        response = await client.options(path, headers=PREFLIGHT)
        assert response.status == 204
        assert await response.read() == b""
        assert response.headers["Access-Control-Allow-Origin"] == "*"
        assert {"get", "post"} <= header_set(response.headers["Access-Control-Allow-Methods"])
        assert {"authorization", "content-type", "x-gateway-key", "x-session-id",
                "x-stainless-os"} <= header_set(response.headers["Access-Control-Allow-Headers"])
        assert int(response.headers["Access-Control-Max-Age"]) > 0
        assert "Access-Control-Allow-Credentials" not in response.headers
    assert upstream.requests == []
    assert upstream.model_requests == 0


async def test_preflight_ignores_header_names_that_are_not_tokens(
        gateway: GatewayStarter) -> None:
    client = await gateway(GATEWAY_SECRET=GATEWAY_KEY)
    response = await client.options("/v1/chat/completions", headers={
        **PREFLIGHT, "Access-Control-Request-Headers": "x-fine, bad header, a:b"})
    assert response.status == 204
    allowed = header_set(response.headers["Access-Control-Allow-Headers"])
    assert "x-fine" in allowed
    assert not {"bad header", "a:b"} & allowed


async def test_preflight_from_a_page_on_the_public_internet_to_a_local_gateway(
        gateway: GatewayStarter) -> None:
    client = await gateway(GATEWAY_SECRET=GATEWAY_KEY)
    response = await client.options("/v1/chat/completions", headers={
        **PREFLIGHT, "Access-Control-Request-Private-Network": "true"})
    assert response.status == 204
    assert response.headers["Access-Control-Allow-Private-Network"] == "true"


async def test_streamed_reply_carries_the_header_and_its_bytes_are_unchanged(
        gateway: GatewayStarter, upstream: FakeUpstream) -> None:
    client = await gateway(GATEWAY_SECRET=GATEWAY_KEY)
    chunks = text_stream("跨域流式 hello", pieces=3)
    # The provider's own CORS answer never reaches the browser: only the gateway's policy counts.
    upstream.queue(Reply(chunks=chunks, headers={"Access-Control-Allow-Origin": "https://x.io",
                                                 "Access-Control-Allow-Credentials": "true"}))
    response = await client.post(
        "/v1/chat/completions", json=chat_body("hi", stream=True),
        headers={"Origin": WEB_APP, "Authorization": f"Bearer {GATEWAY_KEY}"})
    assert response.status == 200
    assert response.headers["Content-Type"].startswith("text/event-stream")
    assert response.headers["Access-Control-Allow-Origin"] == "*"
    assert "Access-Control-Allow-Credentials" not in response.headers
    assert await response.read() == b"".join(chunks)
    await settle(client)


@pytest.mark.parametrize("reply", ["json", "provider_error"])
async def test_plain_replies_and_provider_errors_carry_the_header(
        gateway: GatewayStarter, upstream: FakeUpstream, reply: str) -> None:
    client = await gateway(GATEWAY_SECRET=GATEWAY_KEY)
    if reply == "json":
        upstream.reply_text("plain")
    else:
        upstream.reply_error(429, "slow down")
    response = await client.post("/v1/chat/completions", json=chat_body("hi"),
                                 headers={"Origin": WEB_APP, "X-Gateway-Key": GATEWAY_KEY})
    assert response.status == (200 if reply == "json" else 429)
    assert response.headers["Access-Control-Allow-Origin"] == "*"
    await response.read()
    await settle(client)


async def test_wrong_key_is_a_401_the_browser_can_read(gateway: GatewayStarter,
                                                       upstream: FakeUpstream) -> None:
    client = await gateway(GATEWAY_SECRET=GATEWAY_KEY)
    response = await client.post("/v1/chat/completions", json=chat_body("hi"),
                                 headers={"Origin": WEB_APP, "Authorization": "Bearer wrong"})
    assert response.status == 401
    assert response.headers["Access-Control-Allow-Origin"] == "*"
    assert (await response.json())["error"]["type"] == "authentication_error"
    bad = await client.post("/v1/chat/completions", data=b"{not json",
                            headers={"Origin": WEB_APP, "X-Gateway-Key": GATEWAY_KEY})
    assert bad.status == 400
    assert bad.headers["Access-Control-Allow-Origin"] == "*"
    assert upstream.requests == []


async def test_dashboard_api_and_health_never_allow_other_origins(
        make_client: Any, upstream: FakeUpstream) -> None:
    client = await dashboard_client(make_client, GATEWAY_SECRET=GATEWAY_KEY)
    assert (await login(client)).status == 303
    headers = {"Origin": WEB_APP}
    keyed = {**headers, "X-Gateway-Key": GATEWAY_KEY}
    checks = [
        await client.get("/dashboard/login", headers=headers),
        await client.get("/dashboard/settings", headers=headers),
        await client.get("/api/settings", headers=keyed),
        await client.get("/api/settings", headers=headers),  # 401
        await client.get("/api/models", headers=keyed),
        await client.get("/", headers=headers),
        await client.options("/api/settings", headers={**PREFLIGHT, **keyed}),
        await client.options("/dashboard/settings", headers=PREFLIGHT),
    ]
    assert [r.status for r in checks[:6]] == [200, 200, 200, 401, 200, 200]
    for response in checks:
        assert no_cors(response), (response.url, dict(response.headers))
    assert (await client.get("/v1/models", headers=keyed)).headers[
        "Access-Control-Allow-Origin"] == "*"  # the same app does allow it on /v1


async def test_listed_origins_are_reflected_and_others_refused(
        gateway: GatewayStarter, upstream: FakeUpstream) -> None:
    client = await gateway(GATEWAY_SECRET=GATEWAY_KEY,
                           CORS_ALLOW_ORIGINS="HTTPS://Chat.Example.com/, http://localhost:3000")
    keyed = {"X-Gateway-Key": GATEWAY_KEY}
    allowed = await client.get("/v1/models", headers={**keyed, "Origin": WEB_APP})
    assert allowed.headers["Access-Control-Allow-Origin"] == WEB_APP
    assert "origin" in header_set(allowed.headers["Vary"])
    preflight = await client.options("/v1/models", headers={
        **PREFLIGHT, "Origin": "http://localhost:3000"})
    assert preflight.status == 204
    assert preflight.headers["Access-Control-Allow-Origin"] == "http://localhost:3000"

    stranger = "https://evil.example"
    refused = await client.options("/v1/chat/completions",
                                   headers={**PREFLIGHT, "Origin": stranger})
    assert refused.status == 403
    assert (await refused.json())["error"]["code"] == "origin_not_allowed"
    assert "Access-Control-Allow-Origin" not in refused.headers
    plain = await client.get("/v1/models", headers={**keyed, "Origin": stranger})
    assert plain.status == 200  # a program may still call; a browser page may not read it
    assert "Access-Control-Allow-Origin" not in plain.headers
    assert upstream.requests == []


async def test_empty_setting_turns_cors_off(gateway: GatewayStarter,
                                            upstream: FakeUpstream) -> None:
    client = await gateway(GATEWAY_SECRET=GATEWAY_KEY, CORS_ALLOW_ORIGINS="")
    preflight = await client.options("/v1/chat/completions", headers=PREFLIGHT)
    assert preflight.status == 401  # not answered for browsers: it meets the key check
    assert no_cors(preflight)
    upstream.queue(Reply(chunks=text_stream("x"), headers={"Access-Control-Allow-Origin": "*"}))
    response = await client.post("/v1/chat/completions", json=chat_body(stream=True),
                                 headers={"Origin": WEB_APP, "X-Gateway-Key": GATEWAY_KEY})
    assert response.status == 200
    await response.read()
    assert no_cors(response)
    await settle(client)


async def test_any_origin_needs_a_gateway_secret(gateway: GatewayStarter) -> None:
    open_gateway = await gateway()  # no GATEWAY_SECRET, CORS_ALLOW_ORIGINS left at "*"
    response = await open_gateway.get("/v1/models", headers={"Origin": WEB_APP})
    assert response.status == 200
    assert no_cors(response)
    preflight = await open_gateway.options("/v1/models", headers=PREFLIGHT)
    assert no_cors(preflight)


async def test_open_gateway_still_allows_origins_listed_by_name(gateway: GatewayStarter) -> None:
    client = await gateway(CORS_ALLOW_ORIGINS=WEB_APP)
    response = await client.get("/v1/models", headers={"Origin": WEB_APP})
    assert response.headers["Access-Control-Allow-Origin"] == WEB_APP


async def test_saved_setting_applies_to_the_next_request(gateway: GatewayStarter) -> None:
    client = await gateway(GATEWAY_SECRET=GATEWAY_KEY)
    keyed = {"X-Gateway-Key": GATEWAY_KEY}
    saved = await client.put("/api/settings", json={"CORS_ALLOW_ORIGINS": WEB_APP},
                             headers=keyed)
    assert saved.status == 200
    other = await client.get("/v1/models", headers={**keyed, "Origin": "https://other.example"})
    assert "Access-Control-Allow-Origin" not in other.headers
    mine = await client.get("/v1/models", headers={**keyed, "Origin": WEB_APP})
    assert mine.headers["Access-Control-Allow-Origin"] == WEB_APP


PAGE = """<!doctype html><meta charset="utf-8"><title>web chat</title>
<script>
async function chat(base, key) {
  const response = await fetch(base + "/v1/chat/completions", {
    method: "POST",
    headers: {"Authorization": "Bearer " + key, "Content-Type": "application/json",
              "X-Session-Id": "browser-session"},
    body: JSON.stringify({model: "test/model-a", stream: true,
                          messages: [{role: "user", content: "hi"}]}),
  });
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let text = "";
  for (;;) {
    const {done, value} = await reader.read();
    if (done) break;
    text += decoder.decode(value, {stream: true});
  }
  return {status: response.status, text};
}
async function status(url, key) {
  try {
    const response = await fetch(url, key ? {headers: {"X-Gateway-Key": key}} : {});
    return response.status;
  } catch (error) {
    return "blocked";
  }
}
</script>"""


async def test_a_page_on_another_origin_streams_a_reply_in_chromium(
        gateway: GatewayStarter, upstream: FakeUpstream, aiohttp_server: Any) -> None:
    from playwright.async_api import async_playwright

    from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS

    client = await gateway(GATEWAY_SECRET=GATEWAY_KEY)
    base = str(client.make_url("/")).rstrip("/")
    async def web_chat_page(_request: web.Request) -> web.Response:
        return web.Response(text=PAGE, content_type="text/html")

    site = web.Application()
    site.router.add_get("/", web_chat_page)
    page_server = await aiohttp_server(site)  # another port: another origin
    upstream.reply_text("浏览器里的流式回答", pieces=4)
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page()
            await page.goto(str(page_server.make_url("/")))
            result = await page.evaluate("([base, key]) => chat(base, key)", [base, GATEWAY_KEY])
            wrong_key = await page.evaluate("([u, k]) => status(u, k)",
                                            [base + "/v1/models", "wrong"])
            api = await page.evaluate("([u, k]) => status(u, k)",
                                      [base + "/api/settings", GATEWAY_KEY])
        finally:
            await browser.close()
    assert result["status"] == 200
    events = [json.loads(line[len("data: "):]) for line in result["text"].splitlines()
              if line.startswith("data: {")]
    assert "".join(e["choices"][0]["delta"].get("content") or "" for e in events
                   if e["choices"]) == "浏览器里的流式回答"
    assert wrong_key == 401  # the page can read the error
    assert api == "blocked"  # /api stays closed to other origins
    await settle(client)
