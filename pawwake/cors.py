"""CORS for the /v1, /v1/messages and /mcp sub-apps, so chat clients running in a browser on
another origin can use the gateway.

Those sub-apps authenticate with a header (never a cookie), so responses allow the origin
without credentials mode. /dashboard and /api never get CORS headers (``setup_cors`` is not
called for them): the dashboard relies on its cookie and same-origin checks.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web
from multidict import CIMultiDict
from yarl import URL

from pawwake import keys
from pawwake.app_faces import STARTUP_SETTINGS, face_of, settings_of
from pawwake.errors import openai_error

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

ALLOWED_METHODS = "GET, POST, OPTIONS"
# Always allowed; whatever else a preflight asks for (an SDK's own X-Stainless-* headers...)
# is allowed too, as long as it is a valid header name: the key in a header is the guard.
BASE_HEADERS = ("Authorization", "Content-Type", "X-Gateway-Key", "X-Session-Id",
                "X-Skip-Conversation-Log")
PREFLIGHT_MAX_AGE = "600"  # seconds a browser may reuse a preflight answer
MAX_REQUESTED_HEADERS = 50
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}")


@dataclass(frozen=True)
class CorsPolicy:
    """Which browser origins may read /v1 responses."""

    any_origin: bool = False
    origins: frozenset[str] = frozenset()

    @property
    def enabled(self) -> bool:
        return self.any_origin or bool(self.origins)

    def allow_origin(self, origin: str) -> str | None:
        """The ``Access-Control-Allow-Origin`` value for ``origin``, or None: not allowed."""
        if self.any_origin:
            return "*"
        return origin if normalise_origin(origin) in self.origins else None


def normalise_origin(origin: str) -> str:
    """``HTTPS://Chat.Example.com/`` and ``https://chat.example.com`` are one origin."""
    return origin.strip().rstrip("/").lower()


@functools.lru_cache(maxsize=16)
def parse_policy(raw: str, *, gateway_secret_set: bool) -> CorsPolicy:
    """Read CORS_ALLOW_ORIGINS: comma- or space-separated origins, ``*`` for any, empty: off.

    ``*`` needs a gateway secret: with an open gateway any web page the user visits could read
    replies (and the memories in them) through the user's own browser, so then only origins
    listed by name are allowed. Cached per value, so each warning is logged once.
    """
    origins: set[str] = set()
    any_origin = False
    for entry in re.split(r"[,\s]+", raw.strip()):
        if not entry:
            continue
        if entry == "*":
            any_origin = True
            continue
        url = URL(entry)
        if url.scheme not in ("http", "https") or not url.host or url.path not in ("", "/"):
            log.warning("CORS_ALLOW_ORIGINS: %r is not an origin like https://chat.example.com;"
                        " ignored", entry)
            continue
        origins.add(normalise_origin(entry))
    if any_origin and not gateway_secret_set:
        log.warning("CORS_ALLOW_ORIGINS=* is ignored while GATEWAY_SECRET is unset; "
                    "set a secret or list the allowed origins by name")
        any_origin = False
    return CorsPolicy(any_origin, frozenset(origins))


async def current_policy(request: web.Request) -> CorsPolicy:
    """The policy in force now (CORS_ALLOW_ORIGINS is hot: dashboard saves apply at once).
    On /mcp ``*`` does not count: the MCP security notes want each browser origin checked (its
    sub-app sets ``keys.CORS_NAMED_ORIGINS_ONLY``; DNS rebinding)."""
    settings = await settings_of(request)
    policy = parse_policy(settings.CORS_ALLOW_ORIGINS,
                          gateway_secret_set=bool(face_of(request, STARTUP_SETTINGS).GATEWAY_SECRET))
    if request.config_dict.get(keys.CORS_NAMED_ORIGINS_ONLY, False) and policy.any_origin:
        return CorsPolicy(False, policy.origins)
    return policy


def _is_preflight(request: web.Request) -> bool:
    return (request.method == "OPTIONS" and "Origin" in request.headers
            and "Access-Control-Request-Method" in request.headers)


def allowed_headers(requested: str) -> str:
    """The base headers plus every valid header name the preflight asked for."""
    names = list(BASE_HEADERS)
    known = {name.lower() for name in names}
    for name in requested.split(",")[:MAX_REQUESTED_HEADERS]:
        name = name.strip()
        if _HEADER_NAME.fullmatch(name) and name.lower() not in known:
            known.add(name.lower())
            names.append(name)
    return ", ".join(names)


@web.middleware
async def cors_preflight_middleware(request: web.Request, handler: Handler
                                    ) -> web.StreamResponse:
    """Answer a preflight here, before authentication (browsers never send the key on a
    preflight) and without reaching a route or the provider."""
    if not _is_preflight(request):
        return await handler(request)
    policy = await current_policy(request)
    if not policy.enabled:
        return await handler(request)
    if policy.allow_origin(request.headers["Origin"]) is None:
        return openai_error(403, "This origin is not allowed to call the gateway from a "
                            "browser (CORS_ALLOW_ORIGINS).", code="origin_not_allowed")
    headers = CIMultiDict({
        "Access-Control-Allow-Methods": ALLOWED_METHODS,
        "Access-Control-Allow-Headers": allowed_headers(
            request.headers.get("Access-Control-Request-Headers", "")),
        "Access-Control-Max-Age": PREFLIGHT_MAX_AGE,
        "Vary": "Access-Control-Request-Headers",
    })
    if request.headers.get("Access-Control-Request-Private-Network", "").lower() == "true":
        # A page on a public origin calling a gateway on the user's own machine or network.
        headers["Access-Control-Allow-Private-Network"] = "true"
    return web.Response(status=204, headers=headers)


async def add_cors_headers(request: web.Request, response: web.StreamResponse) -> None:
    """Runs as every response's headers are about to leave, so streamed replies and errors
    (401 included, so the browser shows it) carry the header too. The provider's own CORS
    headers never pass through: only this gateway's policy counts."""
    if not _is_preflight(request):
        for name in {name.lower() for name in response.headers
                     if name.lower().startswith("access-control-")}:
            response.headers.popall(name)
    policy = await current_policy(request)
    if not policy.enabled:
        return
    if not policy.any_origin:
        _vary(response, "Origin")  # the answer differs per origin; shared caches must know
    origin = request.headers.get("Origin")
    allowed = policy.allow_origin(origin) if origin else None
    if allowed is not None:
        response.headers["Access-Control-Allow-Origin"] = allowed


def _vary(response: web.StreamResponse, name: str) -> None:
    present = [v.strip().lower() for v in response.headers.get("Vary", "").split(",")]
    if name.lower() not in present:
        current = response.headers.get("Vary")
        response.headers["Vary"] = f"{current}, {name}" if current else name


def setup_cors(app: web.Application, *, named_origins_only: bool = False) -> None:
    """Give a program sub-app CORS: the preflight answer (first of its middlewares) and the
    headers on every response it sends. ``named_origins_only``: ``*`` does not count (MCP)."""
    app[keys.CORS_NAMED_ORIGINS_ONLY] = named_origins_only
    app.on_response_prepare.append(add_cors_headers)
