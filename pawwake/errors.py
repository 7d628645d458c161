"""Error envelopes: how each program surface writes a refusal (``api_error.ApiError``).

Each sub-app names its envelope (``keys.ERROR_ENVELOPE``) and its error middleware uses it:
OpenAI's on /v1, Anthropic's on /v1/messages, JSON-RPC's on /mcp, Pawwake's own on /api.
"""

from __future__ import annotations

from aiohttp import web

from pawwake.api_error import ApiError


def openai_error(status: int, message: str, *, error_type: str = "invalid_request_error",
                 code: str | None = None, param: str | None = None) -> web.Response:
    """An error a chat client's OpenAI SDK understands."""
    body = {"error": {"message": message, "type": error_type, "code": code, "param": param}}
    return web.json_response(body, status=status)


def anthropic_error(status: int, message: str, *, error_type: str | None = None
                    ) -> web.Response:
    """An error in Anthropic's shape: ``{"type": "error", "error": {"type", "message"}}``."""
    if error_type is None:
        error_type = anthropic_error_type(status)
    return web.json_response({"type": "error", "error": {"type": error_type,
                                                         "message": message}}, status=status)


def anthropic_error_type(status: int) -> str:
    """Anthropic's error type for an HTTP status."""
    return {400: "invalid_request_error", 401: "authentication_error",
            403: "permission_error", 404: "not_found_error", 413: "request_too_large",
            429: "rate_limit_error", 503: "overloaded_error", 529: "overloaded_error"
            }.get(status, "invalid_request_error" if status < 500 else "api_error")


def api_envelope(exc: ApiError) -> web.Response:
    """/api: ``{"error": {"code", "message", ...details}}``."""
    return web.json_response({"error": {"code": exc.code, "message": exc.message,
                                        **exc.details}}, status=exc.status)


def openai_envelope(exc: ApiError) -> web.Response:
    """/v1: OpenAI's ``{"error": {"message", "type", "code", "param"}}``."""
    kind = "invalid_request_error" if exc.status < 500 else "api_error"
    if exc.status == 401:
        kind = "authentication_error"
    return openai_error(exc.status, exc.message, error_type=kind, code=exc.code,
                        param=exc.details.get("param"))


def anthropic_envelope(exc: ApiError) -> web.Response:
    """/v1/messages: Anthropic's ``{"type": "error", "error": {"type", "message"}}``."""
    return anthropic_error(exc.status, exc.message)


def jsonrpc_envelope(exc: ApiError) -> web.Response:
    """/mcp: a JSON-RPC error without an id, as an MCP client reads it."""
    headers = {"WWW-Authenticate": 'Bearer realm="pawwake"'} if exc.status == 401 else None
    rpc_code = -32603 if exc.status >= 500 else -32600  # internal error / invalid request
    return web.json_response({"jsonrpc": "2.0", "id": None,
                              "error": {"code": rpc_code, "message": exc.message}},
                             status=exc.status, headers=headers)
