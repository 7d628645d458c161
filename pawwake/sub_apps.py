"""The program surfaces as aiohttp sub-apps, each with its own middlewares: CORS where browsers
may call it, the refusal of compressed bodies, then error rendering in its envelope, then the
gateway key, or without one the guard of an open gateway (``open_gateway.py``).

Nothing tells them apart by path any more: a request's sub-app decides how it is guarded and how
its errors read. Handlers read shared state with ``request.config_dict[...]`` (``request.app`` is
the sub-app) and reach their feature's face with ``app_faces.face_of(request, KEY)``. Request bodies are
bounded by the root app's ``client_max_size`` (MAX_REQUEST_MB); over it, a sub-app's error
middleware answers 413 in its envelope.
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web

from pawwake import keys
from pawwake.api_error import ApiError
from pawwake.auth import api_auth_middleware
from pawwake.cors import cors_preflight_middleware, setup_cors
from pawwake.errors import anthropic_envelope, api_envelope, jsonrpc_envelope, openai_envelope
from pawwake.middlewares import error_middleware
from pawwake.open_gateway import open_gateway_middleware
from pawwake.request_body import plain_bodies_middleware

Envelope = Callable[[ApiError], web.Response]


def program_app(envelope: Envelope, *, cors: bool = False, named_origins_only: bool = False
                ) -> web.Application:
    """A sub-app for programs: errors in ``envelope``, the gateway key required, CORS when
    ``cors`` (browser clients)."""
    middlewares = [plain_bodies_middleware, error_middleware, api_auth_middleware,
                   open_gateway_middleware]
    if cors:  # first: a preflight is answered before the key is asked for
        middlewares.insert(0, cors_preflight_middleware)
    app = web.Application(middlewares=middlewares)
    app[keys.ERROR_ENVELOPE] = envelope
    if cors:
        setup_cors(app, named_origins_only=named_origins_only)
    return app


def api_app() -> web.Application:
    """/api (and /import): Pawwake's own API, ``{"error": {"code", "message"}}``, no CORS."""
    return program_app(api_envelope)


def v1_app() -> web.Application:
    """/v1: OpenAI-compatible chat, models and responses, OpenAI's error envelope."""
    return program_app(openai_envelope, cors=True)


def messages_app() -> web.Application:
    """/v1/messages: Anthropic's Messages API, Anthropic's error envelope."""
    return program_app(anthropic_envelope, cors=True)


def mcp_app() -> web.Application:
    """/mcp: JSON-RPC errors; browser origins only when listed by name."""
    return program_app(jsonrpc_envelope, cors=True, named_origins_only=True)
