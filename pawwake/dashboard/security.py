"""Dashboard request safety: the encrypted session cookie, same-origin writes, response headers."""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
from collections.abc import Awaitable, Callable

from aiohttp import web
from aiohttp_session import Session
from aiohttp_session.cookie_storage import EncryptedCookieStorage
from cryptography.fernet import Fernet
from yarl import URL

from pawwake.dashboard import dashboard_keys as dkeys
from pawwake.proxies import ClientView, TrustedProxies, resolve_client

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

PREFIX = "/dashboard"
SESSION_COOKIE = "pawwake_dashboard"
SESSION_MAX_AGE = 12 * 60 * 60  # an absolute lifetime: the cookie is only rewritten at login
MIN_SECRET_LENGTH = 32
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

# Only our own files run or load; nothing frames the dashboard; no referrer leaves the site.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; "
        "object-src 'none'"),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


def session_fernet(secret: str) -> Fernet:
    """A Fernet key derived from SESSION_SECRET, which may be any string of 32+ characters."""
    digest = hashlib.sha256(b"pawwake-dashboard-session\x00" + secret.encode("utf-8")).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


def password_fingerprint(secret: str, password: str) -> str:
    """Stored in the session: a changed DASHBOARD_PASSWORD ends every existing session."""
    mac = hmac.new(secret.encode("utf-8"), password.encode("utf-8"), hashlib.sha256)
    return mac.hexdigest()[:32]


def client_view(request: web.Request) -> ClientView:
    """Address, scheme and host of the browser, through the proxies named in TRUSTED_PROXIES."""
    view = request.get(dkeys.CLIENT_VIEW)
    if view is None:
        proxies = request.config_dict.get(dkeys.PROXIES) or TrustedProxies()
        view = resolve_client(request.remote, request.headers, proxies,
                              scheme="https" if request.secure else request.scheme,
                              host=request.host)
        request[dkeys.CLIENT_VIEW] = view
    return view


def request_scheme(request: web.Request) -> str:
    """``https`` or ``http`` as the browser sees it (a trusted proxy's word counts)."""
    return client_view(request).scheme


def request_host(request: web.Request) -> str:
    """The host the browser addressed (a trusted proxy's ``X-Forwarded-Host`` counts)."""
    return client_view(request).host


def normalise_origin(value: str) -> str | None:
    """``scheme://host[:port]`` in lower case with default ports dropped; None if unusable."""
    try:
        url = URL(value)
    except ValueError:
        return None
    if url.scheme not in ("http", "https") or not url.host:
        return None
    origin = f"{url.scheme}://{url.host.lower()}"
    if url.explicit_port is not None and not url.is_default_port():
        origin += f":{url.explicit_port}"
    return origin


def own_origin(request: web.Request) -> str | None:
    return normalise_origin(f"{request_scheme(request)}://{request_host(request)}")


def sender_origin(request: web.Request) -> str | None:
    """Where the browser says the request came from: ``Origin``, else the ``Referer``'s origin."""
    origin = request.headers.get("Origin")
    if origin is not None:
        return normalise_origin(origin.strip())
    referer = request.headers.get("Referer")
    if referer:
        return normalise_origin(referer.strip())
    return None


def is_same_origin(request: web.Request) -> bool:
    expected = own_origin(request)
    sender = sender_origin(request)
    return expected is not None and sender is not None and hmac.compare_digest(sender, expected)


def safe_next(target: str | None, default: str = PREFIX) -> str:
    """A redirect target inside the dashboard only (no open redirects)."""
    if not target or not target.startswith(PREFIX) or target.startswith("//"):
        return default
    url = URL(target)
    if url.is_absolute() or not (url.path == PREFIX or url.path.startswith(PREFIX + "/")):
        return default
    return str(url)


class DashboardCookieStorage(EncryptedCookieStorage):
    """Encrypted cookie sessions whose ``Secure`` flag follows the request's real scheme."""

    def __init__(self, secret: str) -> None:
        super().__init__(session_fernet(secret), cookie_name=SESSION_COOKIE,
                         max_age=SESSION_MAX_AGE, path=PREFIX, httponly=True,
                         samesite="Strict")

    async def save_session(self, request: web.Request, response: web.StreamResponse,
                           session: Session) -> None:
        if session.empty:
            response.del_cookie(SESSION_COOKIE, path=PREFIX, secure=False, httponly=True,
                                samesite="Strict")
            return
        data = self._encoder(self._get_session_data(session)).encode("utf-8")
        response.set_cookie(SESSION_COOKIE, self._fernet.encrypt(data).decode("utf-8"),
                            max_age=SESSION_MAX_AGE, path=PREFIX, httponly=True,
                            samesite="Strict", secure=request_scheme(request) == "https")


@web.middleware
async def headers_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Security and caching headers on every dashboard answer, errors and redirects included."""
    try:
        response = await handler(request)
    except web.HTTPException as exc:
        exc.headers.update(SECURITY_HEADERS)
        raise
    if not response.prepared:
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
    return response
