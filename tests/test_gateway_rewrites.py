"""What the upstream receives: body rewrites, the persona, auxiliary requests left alone,
headers, the model list, and pure forwarding without a database."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pawwake.llm.upstream import upstream_headers
from pawwake.services import services_of
from pawwake.settings import Settings
from tests.fake_upstream import FakeUpstream
from tests.gateway_support import GatewayStarter, chat_body, settle, stored_messages


async def test_force_stream_and_usage_request(gateway: GatewayStarter,
                                              upstream: FakeUpstream) -> None:
    client = await gateway(FORCE_STREAM=True)
    upstream.reply_text("forced", pieces=1)
    response = await client.post("/v1/chat/completions", json=chat_body(stream=False))
    assert response.headers["Content-Type"] == "text/event-stream"
    assert b"forced" in await response.read()
    sent = upstream.requests[0].body
    assert sent["stream"] is True
    assert sent["stream_options"] == {"include_usage": True}


async def test_client_stream_options_are_left_alone(gateway: GatewayStarter,
                                                    upstream: FakeUpstream) -> None:
    client = await gateway()
    body = chat_body(stream=True, stream_options={"include_usage": False})
    await (await client.post("/v1/chat/completions", json=body)).read()
    await (await client.post("/v1/chat/completions", json=chat_body(stream=False))).read()
    assert upstream.requests[0].body["stream_options"] == {"include_usage": False}
    assert "stream_options" not in upstream.requests[1].body


async def test_reasoning_effort_replaces_the_clients(gateway: GatewayStarter,
                                                     upstream: FakeUpstream) -> None:
    client = await gateway(REASONING_EFFORT="high")
    await (await client.post("/v1/chat/completions",
                             json=chat_body(reasoning_effort="low"))).read()
    assert upstream.requests[0].body["reasoning_effort"] == "high"
    client = await gateway(REASONING_EFFORT="")
    await (await client.post("/v1/chat/completions",
                             json=chat_body(reasoning_effort="low"))).read()
    assert upstream.requests[1].body["reasoning_effort"] == "low"


async def test_missing_model_falls_back_to_default_model(gateway: GatewayStarter,
                                                         upstream: FakeUpstream) -> None:
    client = await gateway(DEFAULT_MODEL="vendor/default-x",
                           API_BASE_URL=upstream.base_url + "/chat/completions")
    response = await client.post("/v1/chat/completions",
                                 json={"messages": [{"role": "user", "content": "hi"}]})
    assert response.status == 200
    assert upstream.requests[0].body["model"] == "vendor/default-x"
    assert upstream.requests[0].path == "/v1/chat/completions"
    await settle(client)
    assert {r["model"] for r in await stored_messages(client)} == {"vendor/default-x"}


async def test_client_fields_pass_through(gateway: GatewayStarter,
                                          upstream: FakeUpstream) -> None:
    client = await gateway()
    body = chat_body(temperature=0.3, tools=[{"type": "function",
                                              "function": {"name": "f"}}], top_p=0.9)
    await (await client.post("/v1/chat/completions", json=body)).read()
    sent = upstream.requests[0].body
    assert (sent["temperature"], sent["top_p"], sent["tools"]) == (
        0.3, 0.9, [{"type": "function", "function": {"name": "f"}}])


def system_of(upstream: FakeUpstream, number: int = 0) -> Any:
    first = upstream.requests[number].body["messages"][0]
    return first["content"] if first["role"] == "system" else None


async def test_persona_file_is_used_and_reread_when_it_changes(
        gateway: GatewayStarter, upstream: FakeUpstream) -> None:
    client = await gateway(persona="你是一只会说话的猫。\n")
    await (await client.post("/v1/chat/completions", json=chat_body())).read()
    assert system_of(upstream) == "你是一只会说话的猫。"
    gateway.persona_path.write_text("You are a fox.", encoding="utf-8")
    later = gateway.persona_path.stat().st_mtime + 5
    os.utime(gateway.persona_path, (later, later))
    await (await client.post("/v1/chat/completions", json=chat_body())).read()
    assert system_of(upstream, 1) == "You are a fox."
    gateway.persona_path.unlink()
    await (await client.post("/v1/chat/completions", json=chat_body())).read()
    assert system_of(upstream, 2) is None


async def test_dashboard_persona_wins_over_the_file(gateway: GatewayStarter,
                                                    upstream: FakeUpstream) -> None:
    client = await gateway(persona="file persona")
    await services_of(client.server.app).config.update({"SYSTEM_PROMPT": "dashboard persona"})
    await (await client.post("/v1/chat/completions", json=chat_body())).read()
    assert system_of(upstream) == "dashboard persona"


async def test_no_persona_adds_no_system_message(gateway: GatewayStarter,
                                                 upstream: FakeUpstream) -> None:
    client = await gateway()  # no persona file in this test's directory
    await (await client.post("/v1/chat/completions", json=chat_body())).read()
    assert upstream.requests[0].body["messages"] == [{"role": "user", "content": "你好"}]


async def test_persona_goes_before_the_clients_own_system_text(
        gateway: GatewayStarter, upstream: FakeUpstream) -> None:
    client = await gateway(persona="PERSONA")
    messages = [{"role": "system", "content": "client rules"},
                {"role": "user", "content": "hi"}]
    await (await client.post("/v1/chat/completions",
                             json={"model": "m", "messages": messages})).read()
    assert system_of(upstream) == "PERSONA\n\nclient rules"
    parts = [{"type": "text", "text": "cached rules", "cache_control": {"type": "ephemeral"}}]
    await (await client.post("/v1/chat/completions", json={"model": "anthropic/claude-x",
                                                           "messages": [
        {"role": "system", "content": parts}, {"role": "user", "content": "hi"}]})).read()
    assert system_of(upstream, 1) == [{"type": "text", "text": "PERSONA"}, *parts]


TITLE_PROMPT = (
    "I will give you some dialogue content in the `<content>` block. You need to summarize "
    "the conversation between user and assistant into a short title.\n1. The title should "
    "not exceed 10 characters.\n<content>user: 今天好累\nassistant: 抱抱你</content>")


async def test_title_request_is_forwarded_untouched_and_not_stored(
        gateway: GatewayStarter, upstream: FakeUpstream) -> None:
    client = await gateway(persona="PERSONA", FORCE_STREAM=True, REASONING_EFFORT="high")
    raw = json.dumps({"model": "test/model-a", "stream": False,
                      "messages": [{"role": "user", "content": TITLE_PROMPT}]},
                     ensure_ascii=False).encode()
    upstream.reply_text("疲惫与安慰")
    response = await client.post("/v1/chat/completions", data=raw,
                                 headers={"Content-Type": "application/json"})
    assert (await response.json())["choices"][0]["message"]["content"] == "疲惫与安慰"
    assert upstream.requests[0].raw == raw
    await settle(client)
    assert await stored_messages(client) == []


async def test_skip_header_forwards_untouched_and_stores_nothing(
        gateway: GatewayStarter, upstream: FakeUpstream) -> None:
    client = await gateway(persona="PERSONA")
    raw = json.dumps(chat_body("remember nothing", stream=True)).encode()
    response = await client.post("/v1/chat/completions", data=raw,
                                 headers={"Content-Type": "application/json",
                                          "X-Skip-Conversation-Log": "true"})
    await response.read()
    assert upstream.requests[0].raw == raw
    await settle(client)
    assert await stored_messages(client) == []


async def test_models_lists_default_then_upstream_models_cached(
        gateway: GatewayStarter, upstream: FakeUpstream) -> None:
    client = await gateway(DEFAULT_MODEL="test/model-b")
    body = await (await client.get("/v1/models")).json()
    assert body["object"] == "list"
    assert body["data"][0] == {"id": "test/model-b", "object": "model", "created": 0,
                               "owned_by": "pawwake"}
    assert [m["id"] for m in body["data"]] == ["test/model-b", "test/model-a"]
    upstream.models = ["changed/model"]
    again = await (await client.get("/v1/models")).json()
    assert again == body
    assert upstream.model_requests == 1


async def test_models_without_an_answering_upstream_lists_the_default(
        gateway: GatewayStarter, upstream: FakeUpstream) -> None:
    upstream.models_status = 500
    client = await gateway()
    response = await client.get("/v1/models")
    assert response.status == 200
    assert [m["id"] for m in (await response.json())["data"]] == ["test/model-a"]


def test_openrouter_gets_attribution_headers_and_others_do_not() -> None:
    settings = Settings.from_env({}, API_KEY="sk-or-1")
    url = "https://openrouter.ai/api/v1/chat/completions"
    headers = upstream_headers(settings, url)
    assert headers["Authorization"] == "Bearer sk-or-1"
    assert headers["X-Title"] == "Pawwake"
    assert headers["HTTP-Referer"].startswith("https://")
    other = upstream_headers(settings, "https://api.openai.com/v1/chat/completions")
    assert "X-Title" not in other and "HTTP-Referer" not in other


async def test_database_disabled_forwards_with_the_file_persona(
        gateway: GatewayStarter, upstream: FakeUpstream, tmp_path: Path) -> None:
    data_dir = tmp_path / "never-created"
    client = await gateway(persona="file persona", DATABASE_ENABLED=False, DATABASE_URL="",
                           PAWWAKE_DATA_DIR=str(data_dir))
    assert services_of(client.server.app).database is None
    for stream in (False, True):
        upstream.reply_text("pure forward", pieces=1)
        response = await client.post("/v1/chat/completions", json=chat_body(stream=stream))
        assert response.status == 200
        assert b"pure forward" in await response.read()
    assert system_of(upstream) == "file persona"
    models = await client.get("/v1/models")
    assert models.status == 200
    await settle(client)
    assert services_of(client.server.app).tasks.pending == 0
    assert not data_dir.exists()
