"""What guards the program surfaces while GATEWAY_SECRET is unset (the README's local trial).

Then anyone who reaches the port may call them, and so may every web page the user visits,
through the user's own browser: a cross-site ``fetch`` with a ``text/plain``, form or
multipart body needs no CORS preflight, and a page on a domain that rebinds to 127.0.0.1 is
even same-origin. So, on every program sub-app (the dashboard has its password):

- the ``Host`` must be a loopback name or one of ALLOWED_HOSTS (403 ``host_not_allowed``);
- a write that carries an ``Origin`` (browsers send one; SDKs, hooks and curl do not) must
  come from the gateway's own origin or, on the CORS surfaces, one CORS_ALLOW_ORIGINS names
  (403 ``origin_not_allowed``); a read from elsewhere stays unreadable to its page (no CORS);
- a body must be ``application/json`` (415 ``json_only_without_secret``): a browser sends
  that cross-site only after a preflight, which the gateway answers for allowed origins only.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Awaitable, Callable

from aiohttp import web
from yarl import URL

from pawwake import keys
from pawwake.api_error import ApiError
from pawwake.app_faces import STARTUP_SETTINGS, face_of
from pawwake.cors import current_policy

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

LOOPBACK_NAMES = frozenset({"localhost", "0.0.0.0", "::"})  # the last two: "this machine"
# A page elsewhere may send these, but cannot read the answer (no CORS for it): not a write.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


@functools.lru_cache(maxsize=8)
def allowed_hosts(raw: str) -> frozenset[str]:
    """ALLOWED_HOSTS: comma- or space-separated host names or addresses, any port."""
    names = set()
    for entry in re.split(r"[,\s]+", raw.strip().lower()):
        host = _host_of(entry) if entry else None
        if host:
            names.add(host)
    return frozenset(names)


def _host_of(authority: str) -> str | None:
    """``name``, ``name:port``, ``[v6]:port`` -> the host name, lower case; None if unusable."""
    try:
        host = URL(f"http://{authority}/").host
    except ValueError:
        return None
    return host.lower().strip("[]") if host else None


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _authority(url: URL) -> tuple[str, int | None]:
    return (url.host or "").lower().strip("[]"), url.port


def _same_origin(request: web.Request, origin: str) -> bool:
    """Host and port of ``origin`` are the ones the request was sent to."""
    try:
        sender, own = URL(origin), URL(f"{request.scheme}://{request.host}/")
    except ValueError:
        return False
    return bool(sender.host) and _authority(sender) == _authority(own)


async def _origin_refusal(request: web.Request, origin: str) -> ApiError | None:
    if _same_origin(request, origin):
        return None  # a page of the gateway's own origin
    if keys.CORS_NAMED_ORIGINS_ONLY in request.app and \
            (await current_policy(request)).allow_origin(origin) is not None:
        return None  # a browser client listed in CORS_ALLOW_ORIGINS
    return ApiError("origin_not_allowed",
                    "Requests from other web pages are refused while GATEWAY_SECRET is unset "
                    "(a page the browser visits could otherwise write here); set "
                    "GATEWAY_SECRET, or list a browser client in CORS_ALLOW_ORIGINS.",
                    status=403)


@web.middleware
async def open_gateway_middleware(request: web.Request, handler: Handler
                                  ) -> web.StreamResponse:
    """No effect with a gateway secret: the key in a header is the guard then."""
    settings = face_of(request, STARTUP_SETTINGS)
    if settings.GATEWAY_SECRET:
        return await handler(request)
    host = _host_of(request.host)
    if host is None or not (is_loopback(host) or host in allowed_hosts(settings.ALLOWED_HOSTS)):
        raise ApiError("host_not_allowed",
                       f"Requests for host {request.host[:100]!r} are refused while "
                       "GATEWAY_SECRET is unset (DNS rebinding); add the name to "
                       "ALLOWED_HOSTS, or set GATEWAY_SECRET.", status=403)
    origin = request.headers.get("Origin")
    if origin is not None and request.method not in SAFE_METHODS:
        refusal = await _origin_refusal(request, origin)
        if refusal is not None:
            raise refusal
    if request.body_exists and request.content_type != "application/json":
        raise ApiError("json_only_without_secret",
                       "Send the body as application/json: while GATEWAY_SECRET is unset, "
                       "other bodies are refused (web pages can send them from anywhere).",
                       status=415)
    return await handler(request)
