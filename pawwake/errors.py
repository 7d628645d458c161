"""Error bodies: OpenAI's envelope on /v1, Pawwake's own shape on /api."""

from __future__ import annotations

from aiohttp import web


def openai_error(status: int, message: str, *, error_type: str = "invalid_request_error",
                 code: str | None = None, param: str | None = None) -> web.Response:
    """An error a chat client's OpenAI SDK understands."""
    body = {"error": {"message": message, "type": error_type, "code": code, "param": param}}
    return web.json_response(body, status=status)


def api_error(status: int, code: str, message: str) -> web.Response:
    """An error for Pawwake's own API: ``{"error": {"code", "message"}}``."""
    return web.json_response({"error": {"code": code, "message": message}}, status=status)


ANTHROPIC_PATHS = ("/v1/messages",)


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


def error_for_path(path: str, status: int, code: str, message: str) -> web.Response:
    """Pick the error shape that the caller of ``path`` expects."""
    if path == "/mcp":  # an MCP client reads a JSON-RPC error without an id
        headers = {"WWW-Authenticate": 'Bearer realm="pawwake"'} if status == 401 else None
        rpc_code = -32603 if status >= 500 else -32600  # internal error / invalid request
        return web.json_response({"jsonrpc": "2.0", "id": None,
                                  "error": {"code": rpc_code, "message": message}},
                                 status=status, headers=headers)
    if path.startswith(ANTHROPIC_PATHS):
        return anthropic_error(status, message)
    if path.startswith("/v1/"):
        kind = "invalid_request_error" if status < 500 else "api_error"
        if status == 401:
            kind = "authentication_error"
        return openai_error(status, message, error_type=kind, code=code)
    return api_error(status, code, message)
