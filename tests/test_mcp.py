"""/mcp through the official MCP Python SDK client against the real app on a real port, plus the
transport rules (auth, Origin, versions, GET/DELETE) spoken over plain HTTP."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from mcp import Client
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from pawwake.db.pool import cursor, fetch_all
from tests.memory_support import pool

KEY = "mcp-gateway-key-0123456789abcdef"
SETTINGS = {"GATEWAY_SECRET": KEY, "JOB_WORKERS": 0, "CONVERSATION_RECALL_ENABLED": True,
            "MEMORY_ENABLED": False, "MEMORY_VECTOR_ENABLED": False,
            "CORS_ALLOW_ORIGINS": "https://chat.example.com"}
TOOLS = {"search_memories", "add_memory", "update_memory", "archive_memory",
         "search_conversations", "due_reminders"}
BROWSER_JSON = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


@pytest.fixture
async def api(make_client: Any) -> Any:
    return await make_client(**SETTINGS)


@asynccontextmanager
async def mcp_session(api: Any, headers: dict[str, str] | None = None
                      ) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {KEY}"} if headers is None else headers
    url = str(api.make_url("/mcp"))
    async with create_mcp_http_client(headers=headers) as http, \
            streamable_http_client(url, http_client=http) as (read, write), \
            ClientSession(read, write) as session:
        yield session


async def rpc(api: Any, body: Any, **headers: str) -> Any:
    return await api.post("/mcp", json=body, headers={
        "Authorization": f"Bearer {KEY}", **BROWSER_JSON, **headers})


def leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]


def structured(result: Any) -> dict[str, Any]:
    assert result.is_error is False, result.content
    assert result.content[0].type == "text" and result.content[0].text
    return result.structured_content


async def test_initialize_and_list_tools(api: Any) -> None:
    async with mcp_session(api) as session:
        init = await session.initialize()
        assert init.protocol_version == "2025-11-25"
        assert init.server_info.name == "pawwake"
        assert init.capabilities.tools is not None
        listed = await session.list_tools()
    tools = {tool.name: tool for tool in listed.tools}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.input_schema["type"] == "object"
        assert "additionalProperties" not in json.dumps(tool.input_schema)  # Gemini refuses it
        assert any("\u4e00" <= ch <= "\u9fff" for ch in tool.description)  # Chinese too
        assert any(ch.isascii() and ch.isalpha() for ch in tool.description)
        assert tool.output_schema["type"] == "object"  # the client checks results against it
    assert tools["add_memory"].input_schema["required"] == ["content", "importance"]
    assert tools["search_conversations"].input_schema["required"] == ["query"]


async def test_memory_tools_round_trip(api: Any) -> None:
    async with mcp_session(api) as session:
        await session.initialize()
        added = structured(await session.call_tool("add_memory", {
            "content": "用户的猫叫团子，喜欢吃三文鱼", "importance": 7, "title": "猫",
            "event_date": "2026-03-01"}))
        assert added["inserted"] is True
        number = added["memory"]["id"]
        found = structured(await session.call_tool("search_memories",
                                                   {"query": "团子", "limit": 5}))
        assert [m["id"] for m in found["memories"]] == [number]
        assert found["memories"][0]["event_date"] == "2026-03-01"
        updated = structured(await session.call_tool("update_memory", {
            "id": number, "importance": 9, "layer": 3}))
        assert updated["changed"] == ["importance", "layer"]
        assert (updated["memory"]["importance"], updated["memory"]["layer"]) == (9, 3)
        archived = structured(await session.call_tool("archive_memory", {"id": number}))
        assert archived["memory"]["is_active"] is False
        again = await session.call_tool("archive_memory", {"id": number})
        assert again.is_error is True
        assert again.structured_content["error"]["code"] == "already_archived"
        empty = structured(await session.call_tool("search_memories", {"query": "团子"}))
    assert empty["memories"] == []


async def test_same_external_id_twice_makes_one_row(api: Any) -> None:
    args = {"content": "Dentist on Friday", "importance": 4, "external_id": "claude-42"}
    async with mcp_session(api) as session:
        await session.initialize()
        first = structured(await session.call_tool("add_memory", args))
        second = structured(await session.call_tool("add_memory", args))
    assert (first["inserted"], second["inserted"]) == (True, False)
    assert first["memory"]["id"] == second["memory"]["id"]
    async with cursor(pool(api)) as cur:
        rows = await fetch_all(cur, "SELECT id FROM memories WHERE external_id = %s",
                               ("claude-42",))
    assert len(rows) == 1


async def test_due_reminders_are_delivered_once(api: Any) -> None:
    past = (datetime.now(UTC) - timedelta(minutes=5)).isoformat()
    future = (datetime.now(UTC) + timedelta(days=2)).isoformat()
    async with mcp_session(api) as session:
        await session.initialize()
        due = structured(await session.call_tool("add_memory", {
            "content": "Call mum", "importance": 6, "remind_at": past}))
        structured(await session.call_tool("add_memory", {
            "content": "Renew passport", "importance": 6, "remind_at": future}))
        first = structured(await session.call_tool("due_reminders", {}))
        second = structured(await session.call_tool("due_reminders"))
    assert [r["id"] for r in first["reminders"]] == [due["memory"]["id"]]
    assert first["reminders"][0]["content"] == "Call mum"
    assert second["reminders"] == []


async def test_search_conversations_with_exclusions(api: Any) -> None:
    for session_id, text in (("trip", "下个月去京都看红叶"), ("cat", "我的猫不爱吃猫粮")):
        resp = await api.post("/api/conversations/turn", headers={"X-Gateway-Key": KEY}, json={
            "turn_id": session_id, "session_id": session_id, "source": "test",
            "messages": [{"role": "user", "content": text},
                         {"role": "assistant", "content": "好的，记住了。"}]})
        assert resp.status == 201
    async with mcp_session(api) as session:
        await session.initialize()
        found = structured(await session.call_tool("search_conversations",
                                                   {"query": "京都红叶"}))
        assert found["fragments"][0]["session_id"] == "trip"
        assert "京都" in (await session.call_tool(
            "search_conversations", {"query": "京都红叶"})).content[0].text
        rest = structured(await session.call_tool("search_conversations", {
            "query": "京都红叶", "exclude_session_ids": ["trip"]}))
        assert "trip" not in {f["session_id"] for f in rest["fragments"]}
        skipped = structured(await session.call_tool("search_conversations", {
            "query": "京都红叶", "exclude_fragment_ids": found["fragment_ids"]}))
    assert found["fragment_ids"][0] not in skipped["fragment_ids"]


BAD_CALLS = [
    pytest.param("add_memory", {"importance": 5}, "content", id="add-no-content"),
    pytest.param("add_memory", {"content": "x"}, "importance", id="add-no-importance"),
    pytest.param("add_memory", {"content": "x", "importance": 11}, "importance",
                 id="add-importance-high"),
    pytest.param("add_memory", {"content": "x", "importance": 5, "layer": 3}, "layer",
                 id="add-layer-not-offered"),
    pytest.param("add_memory", {"content": "x", "importance": 5,
                                "remind_at": "2026-01-02T09:00:00"}, "remind_at",
                 id="add-naive-remind-at"),
    pytest.param("add_memory", {"content": "x", "importance": 5, "event_date": "2026-02-30"},
                 "event_date", id="add-impossible-date"),
    pytest.param("update_memory", {"importance": 5}, "id", id="update-no-id"),
    pytest.param("update_memory", {"id": 1}, None, id="update-nothing"),
    pytest.param("update_memory", {"id": True, "title": "x"}, "id", id="update-bool-id"),
    pytest.param("archive_memory", {"id": "1"}, "id", id="archive-string-id"),
    pytest.param("search_memories", {"query": ""}, None, id="search-empty"),
    pytest.param("search_memories", {"query": "cat", "limit": 0}, None, id="search-limit-0"),
    pytest.param("search_memories", {"q": "cat"}, "q", id="search-unknown-arg"),
    pytest.param("search_conversations", {"query": "x", "exclude_session_ids": "a"}, None,
                 id="conversations-ids-not-list"),
    pytest.param("due_reminders", {"limit": 3}, "limit", id="reminders-unknown-arg"),
]


@pytest.mark.parametrize(("tool", "args", "field"), BAD_CALLS)
async def test_bad_arguments_are_tool_errors(api: Any, tool: str, args: dict[str, Any],
                                             field: str | None) -> None:
    async with mcp_session(api) as session:
        await session.initialize()
        result = await session.call_tool(tool, args)
    assert result.is_error is True
    error = result.structured_content["error"]
    assert error["message"] and error["message"] in result.content[0].text
    assert error.get("field") == field
    async with cursor(pool(api)) as cur:
        assert await fetch_all(cur, "SELECT id FROM memories") == []


async def test_missing_memory_is_a_tool_error(api: Any) -> None:
    async with mcp_session(api) as session:
        await session.initialize()
        result = await session.call_tool("update_memory", {"id": 999, "title": "x"})
    assert result.is_error is True
    assert result.structured_content["error"]["code"] == "not_found"


async def test_unknown_tool_is_a_protocol_error(api: Any) -> None:
    async with mcp_session(api) as session:
        await session.initialize()
        with pytest.raises(MCPError) as caught:
            await session.call_tool("delete_everything", {})
    assert caught.value.error.code == -32602


@pytest.mark.parametrize("headers", [
    pytest.param({}, id="no-key"),
    pytest.param({"Authorization": "Bearer wrong-key"}, id="wrong-key"),
])
async def test_auth_refused_without_the_key(api: Any, headers: dict[str, str]) -> None:
    with pytest.raises(BaseExceptionGroup) as caught:  # the SDK's task groups wrap it
        async with mcp_session(api, headers) as session:
            await session.initialize()
    errors = leaves(caught.value)
    assert [type(e) for e in errors] == [MCPError]
    assert "gateway key" in str(errors[0])
    resp = await api.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                          headers={**BROWSER_JSON, **headers})
    assert resp.status == 401
    assert resp.headers["WWW-Authenticate"].startswith("Bearer")
    assert (await resp.json())["error"]["code"] == -32600


async def test_the_high_level_client_falls_back_from_its_discover_probe(api: Any) -> None:
    """mcp.Client probes ``server/discover`` (2026-07-28) first; our 400 with -32022 naming the
    handshake revisions sends it to ``initialize``."""
    url = str(api.make_url("/mcp"))
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {KEY}"}) as http, \
            Client(streamable_http_client(url, http_client=http)) as client:
        assert client.session.protocol_version == "2025-11-25"
        result = await client.call_tool("search_memories", {"query": "cat"})
    assert result.is_error is False


async def test_x_gateway_key_is_accepted(api: Any) -> None:
    async with mcp_session(api, {"X-Gateway-Key": KEY}) as session:
        await session.initialize()
        await session.send_ping()


async def test_foreign_origin_refused(api: Any) -> None:
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    resp = await rpc(api, ping, Origin="https://evil.example")
    assert resp.status == 403
    assert (await resp.json())["error"]["code"] == -32600
    resp = await rpc(api, ping, Origin=str(api.make_url("")).rstrip("/"))  # rebinding: own Host
    assert resp.status == 403
    resp = await rpc(api, ping, Origin="https://chat.example.com")  # listed by name
    assert resp.status == 200
    assert (await resp.json()) == {"jsonrpc": "2.0", "id": 1, "result": {}}


async def test_a_listed_browser_origin_gets_cors(api: Any) -> None:
    preflight = {"Origin": "https://chat.example.com", "Access-Control-Request-Method": "POST",
                 "Access-Control-Request-Headers": "authorization, content-type, "
                                                   "mcp-protocol-version"}
    resp = await api.options("/mcp", headers=preflight)
    assert resp.status == 204
    assert "mcp-protocol-version" in resp.headers["Access-Control-Allow-Headers"]
    resp = await rpc(api, {"jsonrpc": "2.0", "id": 1, "method": "ping"},
                     Origin="https://chat.example.com")
    assert resp.headers["Access-Control-Allow-Origin"] == "https://chat.example.com"
    resp = await api.options("/mcp", headers={**preflight, "Origin": "https://evil.example"})
    assert resp.status == 403
    assert "Access-Control-Allow-Origin" not in resp.headers


async def test_wildcard_cors_does_not_open_mcp_to_browsers(make_client: Any) -> None:
    api = await make_client(**{**SETTINGS, "CORS_ALLOW_ORIGINS": "*"})
    resp = await rpc(api, {"jsonrpc": "2.0", "id": 1, "method": "ping"},
                     Origin="https://evil.example")
    assert resp.status == 403


async def test_protocol_version_negotiation(api: Any) -> None:
    def init(version: str) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}}

    resp = await rpc(api, init("2025-06-18"))
    assert (await resp.json())["result"]["protocolVersion"] == "2025-06-18"
    assert "Mcp-Session-Id" not in resp.headers
    resp = await rpc(api, init("2099-01-01"))
    assert (await resp.json())["result"]["protocolVersion"] == "2025-11-25"
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    for bad in ("2000-01-01", "not-a-version", "2026-07-28"):
        resp = await rpc(api, ping, **{"MCP-Protocol-Version": bad})
        assert resp.status == 400, bad
        error = (await resp.json())["error"]
        assert error["code"] == -32022 and "2025-11-25" in error["data"]["supported"]
    resp = await rpc(api, ping, **{"MCP-Protocol-Version": "2025-03-26"})
    assert resp.status == 200
    resp = await rpc(api, ping)  # no header: the spec's default revision
    assert resp.status == 200


@pytest.mark.parametrize(("body", "status", "code"), [
    pytest.param(b"{not json", 400, -32700, id="parse-error"),
    pytest.param(b'[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]', 400, -32600, id="batch"),
    pytest.param(b'{"id": 1, "method": "ping"}', 400, -32600, id="no-jsonrpc"),
    pytest.param(b'{"jsonrpc": "2.0", "id": 1, "method": "nope"}', 200, -32601,
                 id="unknown-method"),
    pytest.param(b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": []}', 400,
                 -32600, id="params-not-object"),
])
async def test_protocol_errors(api: Any, body: bytes, status: int, code: int) -> None:
    resp = await api.post("/mcp", data=body, headers={"Authorization": f"Bearer {KEY}",
                                                      **BROWSER_JSON})
    assert resp.status == status
    assert (await resp.json())["error"]["code"] == code


async def test_transport_rules(api: Any) -> None:
    auth = {"Authorization": f"Bearer {KEY}"}
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    resp = await rpc(api, note)
    assert resp.status == 202 and await resp.read() == b""
    for method in ("GET", "DELETE"):
        resp = await api.request(method, "/mcp", headers={**auth, "Accept": "text/event-stream"})
        assert resp.status == 405, method
        assert resp.headers["Allow"] == "POST"
    resp = await api.post("/mcp", data=b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}',
                          headers={**auth, "Content-Type": "text/plain"})
    assert resp.status == 415
    resp = await api.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                          headers={**auth, "Accept": "text/html"})
    assert resp.status == 406


@pytest.mark.parametrize(("tool", "args"), [
    pytest.param("search_memories", {"query": "cat"}, id="search"),
    pytest.param("add_memory", {"content": "x", "importance": 5}, id="add"),
    pytest.param("search_conversations", {"query": "cat"}, id="conversations"),
    pytest.param("due_reminders", {}, id="reminders"),
])
async def test_without_a_database_tools_say_so(make_client: Any, tool: str,
                                               args: dict[str, Any]) -> None:
    api = await make_client(**SETTINGS, DATABASE_ENABLED=False)
    async with mcp_session(api) as session:
        await session.initialize()
        result = await session.call_tool(tool, args)
    assert result.is_error is True
    assert result.structured_content["error"]["code"] == "database_unavailable"


async def test_conversation_recall_off_is_a_tool_error(make_client: Any) -> None:
    api = await make_client(**{**SETTINGS, "CONVERSATION_RECALL_ENABLED": False})
    async with mcp_session(api) as session:
        await session.initialize()
        result = await session.call_tool("search_conversations", {"query": "cat"})
    assert result.is_error is True
    assert result.structured_content["error"]["code"] == "conversation_recall_disabled"
