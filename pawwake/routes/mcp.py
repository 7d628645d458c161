"""/mcp: the MCP Streamable HTTP transport, JSON-RPC over POST answered with plain JSON.

Every tool answers in one piece, so no reply needs an SSE stream; no session is kept (see
``mcp.protocol``), so GET (a server-to-client stream) and DELETE (ending a session) are 405.
Authentication is the API's (``auth``); here the transport's own rules: Origin, media types,
protocol version.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from pawwake.app_faces import MCP, face_of, settings_of
from pawwake.cors import current_policy
from pawwake.mcp import protocol
from pawwake.mcp.protocol import INVALID_REQUEST, PARSE_ERROR, RpcError
from pawwake.request_body import BodyTooLarge, read_bounded
from pawwake.text.json_input import JsonTooDeep, parse_json

MAX_BODY_BYTES = 1024 * 1024  # a memory holds at most 20,000 characters
VERSION_HEADER = "MCP-Protocol-Version"


def _reply(body: dict[str, Any], status: int = 200) -> web.Response:
    return web.json_response(body, status=status)


def _refusal(exc: RpcError) -> web.Response:
    return _reply(exc.body(), exc.status)


async def check_origin(request: web.Request) -> None:
    """MCP security notes: a browser Origin that is not allowed gets 403 (DNS rebinding).

    Programs send no Origin. A browser client is allowed only when its origin is listed by name
    in CORS_ALLOW_ORIGINS (``cors``): ``*`` does not count here, and neither does the request's
    own Host, which a rebinding attacker controls."""
    origin = request.headers.get("Origin")
    if origin is None:
        return
    if (await current_policy(request)).allow_origin(origin) is None:
        raise RpcError(INVALID_REQUEST, "This Origin may not call the MCP server; list it in "
                       "CORS_ALLOW_ORIGINS to allow a browser client.", status=403)


def _accepts_json(accept: str | None) -> bool:
    if not accept:
        return True
    kinds = {part.split(";")[0].strip().lower() for part in accept.split(",")}
    return bool(kinds & {"application/json", "application/*", "*/*"})


async def _read_message(request: web.Request) -> protocol.Message:
    if not _accepts_json(request.headers.get("Accept")):
        raise RpcError(INVALID_REQUEST, "Accept must include application/json.", status=406)
    if request.content_type != "application/json":
        raise RpcError(INVALID_REQUEST, "Send the JSON-RPC message as application/json.",
                       status=415)
    try:
        data = await read_bounded(request, MAX_BODY_BYTES)
    except BodyTooLarge:
        raise RpcError(INVALID_REQUEST, "The message is larger than 1 MB.", status=413) from None
    try:
        body = parse_json(data.decode("utf-8"))
    except JsonTooDeep as exc:
        raise RpcError(PARSE_ERROR, str(exc), status=400) from None
    except (ValueError, UnicodeDecodeError):
        raise RpcError(PARSE_ERROR, "The body is not valid JSON.", status=400) from None
    return protocol.parse_message(body)


async def post(request: web.Request) -> web.StreamResponse:
    try:
        await check_origin(request)
        message = await _read_message(request)
    except RpcError as exc:
        return _refusal(exc)
    try:
        if message.method != "initialize":  # initialize negotiates in its body
            protocol.check_header_version(request.headers.get(VERSION_HEADER))
    except RpcError as exc:
        return _reply(exc.body(message.id), exc.status)
    if not message.is_request:  # notifications and replies: accepted, nothing to answer
        return web.Response(status=202)
    try:
        result = await protocol.handle(face_of(request, MCP), await settings_of(request), message)
    except RpcError as exc:
        return _reply(exc.body(message.id), exc.status)
    return _reply({"jsonrpc": "2.0", "id": message.id, "result": result})


async def not_allowed(request: web.Request) -> web.Response:
    """GET would open a server-to-client stream and DELETE end a session: we offer neither."""
    try:
        await check_origin(request)
    except RpcError as exc:
        return _refusal(exc)
    what = "a server-to-client stream" if request.method == "GET" else "sessions to end"
    refusal = RpcError(INVALID_REQUEST,
                       f"This MCP server has no {what}; POST JSON-RPC messages.", status=405)
    return web.json_response(refusal.body(), status=405, headers={"Allow": "POST"})


def setup(app: web.Application) -> None:
    """The one path of the /mcp sub-app: its root."""
    app.router.add_post("", post, name="mcp")
    app.router.add_get("", not_allowed, name="mcp_get", allow_head=False)
    app.router.add_delete("", not_allowed, name="mcp_delete")
