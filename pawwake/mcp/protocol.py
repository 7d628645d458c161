"""JSON-RPC 2.0 and the MCP lifecycle, stateless: every POST carries one message.

No session is kept: the tools are plain request/response, a free-tier host restarts often (a
session id would then answer 404 and make clients reconnect), and no state means any number of
workers can serve any request. Versions are negotiated in ``initialize`` and checked per request
from the ``MCP-Protocol-Version`` header.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pawwake import __version__
from pawwake.mcp import schemas, tools

if TYPE_CHECKING:
    from pawwake.mcp.tools import McpTools
    from pawwake.settings import Settings

# Handshake-era revisions that define the Streamable HTTP transport, newest first.
SUPPORTED_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26")
LATEST_VERSION = SUPPORTED_VERSIONS[0]
DEFAULT_HEADER_VERSION = "2025-03-26"  # what the spec says to assume without the header

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
UNSUPPORTED_PROTOCOL_VERSION = -32022

INSTRUCTIONS = (
    "Pawwake is the user's long-term memory. Search it before answering questions about the "
    "user's life, preferences or earlier conversations; add a memory when the user shares a "
    "lasting fact; call due_reminders at the start of a conversation.\n"
    "Pawwake（爪迹）是用户的长期记忆。回答与用户生活、偏好或以前对话有关的问题前先搜索；用户说出"
    "值得长期记住的事时添加记忆；对话开始时调用 due_reminders。")


class RpcError(Exception):
    """A JSON-RPC error; ``status`` is the HTTP status the transport answers it with."""

    def __init__(self, code: int, message: str, *, status: int = 200,
                 data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
        self.data = data

    def body(self, request_id: Any = None) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return {"jsonrpc": "2.0", "id": request_id, "error": error}


@dataclass(frozen=True)
class Message:
    """One incoming JSON-RPC message, its envelope checked."""

    method: str | None
    id: Any
    params: dict[str, Any]

    @property
    def is_request(self) -> bool:
        return self.method is not None and self.id is not None


def check_header_version(value: str | None) -> str:
    """The revision a request says it speaks; an unknown one is a 400 (spec: transports)."""
    if value is None:
        return DEFAULT_HEADER_VERSION
    version = value.strip()
    if version not in SUPPORTED_VERSIONS:
        raise RpcError(UNSUPPORTED_PROTOCOL_VERSION,
                       "Unsupported MCP-Protocol-Version; supported: "
                       + ", ".join(SUPPORTED_VERSIONS), status=400,
                       data={"supported": list(SUPPORTED_VERSIONS), "requested": version[:40]})
    return version


def parse_message(body: Any) -> Message:
    """Check the JSON-RPC envelope of one message (batches are not part of 2025-06-18 on)."""
    if isinstance(body, list):
        raise RpcError(INVALID_REQUEST, "Send one JSON-RPC message per POST; batches are not "
                       "supported.", status=400)
    if not isinstance(body, dict) or body.get("jsonrpc") != "2.0":
        raise RpcError(INVALID_REQUEST, "Not a JSON-RPC 2.0 message.", status=400)
    request_id = body.get("id")
    if request_id is not None and (isinstance(request_id, bool)
                                   or not isinstance(request_id, (str, int))):
        raise RpcError(INVALID_REQUEST, "A request id must be a string or an integer.",
                       status=400)
    method = body.get("method")
    if method is None:
        if "result" in body or "error" in body:  # a client's reply: we never ask, so ignore
            return Message(None, request_id, {})
        raise RpcError(INVALID_REQUEST, "A JSON-RPC message needs a method.", status=400)
    if not isinstance(method, str):
        raise RpcError(INVALID_REQUEST, "method must be a string.", status=400)
    params = body.get("params", {})
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise RpcError(INVALID_REQUEST, "params must be an object.", status=400)
    return Message(method, request_id, params)


def initialize(params: dict[str, Any]) -> dict[str, Any]:
    """Answer with the client's revision when we speak it, else our newest (spec: lifecycle)."""
    asked = params.get("protocolVersion")
    if not isinstance(asked, str):
        raise RpcError(INVALID_PARAMS, "initialize needs params.protocolVersion.")
    version = asked if asked in SUPPORTED_VERSIONS else LATEST_VERSION
    return {
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": False}},
        "serverInfo": {"name": "pawwake", "title": "Pawwake 爪迹", "version": __version__},
        "instructions": INSTRUCTIONS,
    }


async def handle(parts: McpTools, settings: Settings, message: Message) -> dict[str, Any]:
    """The result of one request, or RpcError."""
    method, params = message.method, message.params
    if method == "initialize":
        return initialize(params)
    if method == "ping":
        return {}
    if method == "tools/list":
        return {"tools": schemas.definitions()}
    if method == "tools/call":
        name = params.get("name")
        arguments = params.get("arguments", {})
        if arguments is None:
            arguments = {}
        if not isinstance(name, str) or not isinstance(arguments, dict):
            raise RpcError(INVALID_PARAMS, "tools/call needs a tool name and an arguments "
                           "object.")
        if not tools.exists(name):
            raise RpcError(INVALID_PARAMS, f"Unknown tool: {name[:100]}.")
        return await tools.call(parts, settings, name, arguments)
    raise RpcError(METHOD_NOT_FOUND, f"Method not found: {str(method)[:100]}.")
