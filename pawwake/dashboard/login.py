"""Dashboard login: the password form, the known-browser cookie, a logout that revokes."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import secrets
import time

from aiohttp import web
from aiohttp_session import get_session, new_session

from pawwake.dashboard import dashboard_keys as dkeys
from pawwake.dashboard.i18n import request_language, translate
from pawwake.dashboard.login_throttle import LoginClient, LoginThrottle
from pawwake.dashboard.public_form import public_form
from pawwake.dashboard.render import render
from pawwake.dashboard.security import (
    PREFIX,
    SESSION_MAX_AGE,
    client_view,
    password_fingerprint,
    request_scheme,
    safe_next,
)
from pawwake.dashboard.session_revocations import SessionRevocations, database_pool
from pawwake.proxies import parse_address

log = logging.getLogger(__name__)

DEVICE_COOKIE = "pawwake_device"  # marks a browser that signed in here before
DEVICE_MAX_AGE = 180 * 24 * 60 * 60


def _fingerprint(request: web.Request) -> str:
    app = request.app
    return password_fingerprint(app[dkeys.SESSION_SECRET], app[dkeys.PASSWORD])


async def is_authenticated(request: web.Request) -> bool:
    """A session from a login with the password in force now, not ended by a logout."""
    session = await get_session(request)
    stored, sid = session.get("auth"), session.get("sid")
    if not (isinstance(stored, str) and isinstance(sid, str)
            and hmac.compare_digest(stored, _fingerprint(request))):
        return False
    revocations = request.app[dkeys.REVOCATIONS]
    return not await revocations.is_revoked(database_pool(request), sid)


def _device_mac(request: web.Request, device: str) -> str:
    """Bound to SESSION_SECRET and the password: a new password forgets every known browser."""
    message = b"pawwake-device\x00" + device.encode("utf-8") + b"\x00" + \
        _fingerprint(request).encode("ascii")
    return hmac.new(request.app[dkeys.SESSION_SECRET].encode("utf-8"), message,
                    hashlib.sha256).hexdigest()[:32]


def known_device(request: web.Request) -> str | None:
    """The device id of a browser that signed in here before, if its cookie is genuine."""
    device, _, mac = request.cookies.get(DEVICE_COOKIE, "").partition(".")
    if not device or not mac or len(device) > 64:
        return None
    return device if hmac.compare_digest(mac, _device_mac(request, device)) else None


def login_client(request: web.Request) -> LoginClient:
    """The throttle's view of the client: its real address (an IPv6 /64 as one) and device."""
    address = client_view(request).address
    ip = parse_address(address)
    if isinstance(ip, ipaddress.IPv6Address):
        address = str(ipaddress.IPv6Network((ip, 64), strict=False))
    return LoginClient(address=address, device=known_device(request))


def _remember_device(request: web.Request, response: web.StreamResponse, device: str | None
                     ) -> None:
    device = device or secrets.token_urlsafe(16)
    response.set_cookie(DEVICE_COOKIE, f"{device}.{_device_mac(request, device)}",
                        max_age=DEVICE_MAX_AGE, path=PREFIX, httponly=True, samesite="Strict",
                        secure=request_scheme(request) == "https")


def _login_page(request: web.Request, *, error: str | None = None, notice: str | None = None,
                status: int = 200) -> web.Response:
    next_url = safe_next(request.query.get("next"))
    return render(request, "login.html", {"error": error, "notice": notice, "next": next_url},
                  status=status)


async def login_form(request: web.Request) -> web.Response:
    if await is_authenticated(request):
        raise web.HTTPSeeOther(safe_next(request.query.get("next")))
    notice = None
    if request.query.get("reason") == "expired":
        notice = translate(request_language(request), "login.required")
    elif request.query.get("reason") == "signed_out":
        notice = translate(request_language(request), "login.signed_out")
    return _login_page(request, notice=notice)


async def login_submit(request: web.Request) -> web.Response:
    """Check the password in constant time; on success start a brand-new session."""
    lang = request_language(request)
    throttle = request.app[dkeys.LOGIN_THROTTLE]
    client = login_client(request)
    pool = database_pool(request)
    wait = await throttle.wait_seconds(pool, client)
    if wait > 0:
        minutes = max(1, round(wait / 60))
        return _login_page(request, error=translate(lang, "login.locked", minutes=minutes),
                           status=429)
    form = public_form(request)
    password = form.get("password")
    expected = request.app[dkeys.PASSWORD]
    if not isinstance(password, str) or not hmac.compare_digest(
            password.encode("utf-8"), expected.encode("utf-8")):
        log.warning("dashboard login failed from %s", client.address)
        await throttle.failed(pool, client)
        return _login_page(request, error=translate(lang, "login.wrong"), status=401)
    await throttle.succeeded(pool, client)
    await _end_session(request)  # a cookie from before this login stops working too
    session = await new_session(request)
    session["auth"] = _fingerprint(request)
    session["sid"] = secrets.token_urlsafe(24)
    session["login_at"] = int(time.time())
    log.info("dashboard login from %s", client.address)
    target = form.get("next")
    redirect = web.HTTPSeeOther(safe_next(target if isinstance(target, str) else None))
    _remember_device(request, redirect, client.device)
    raise redirect


async def _end_session(request: web.Request) -> None:
    session = await get_session(request)
    sid = session.get("sid")
    if isinstance(sid, str):
        await request.app[dkeys.REVOCATIONS].revoke(database_pool(request), sid,
                                                    session.get("login_at"))
    session.invalidate()


async def logout(request: web.Request) -> web.Response:
    """End the session here and on the server: the same cookie replayed later is refused."""
    await _end_session(request)
    location = request.app.router["login"].url_for().with_query(reason="signed_out")
    raise web.HTTPSeeOther(str(location))


def setup(dashboard: web.Application) -> None:
    dashboard[dkeys.LOGIN_THROTTLE] = LoginThrottle()
    dashboard[dkeys.REVOCATIONS] = SessionRevocations(SESSION_MAX_AGE)
    dashboard.router.add_get("/login", login_form, name="login")
    dashboard.router.add_post("/login", login_submit, name="login_submit")
    dashboard.router.add_post("/logout", logout, name="logout")
