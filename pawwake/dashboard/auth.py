"""Dashboard login: the password form, a throttle against guessing, logout."""

from __future__ import annotations

import asyncio
import hmac
import logging
import secrets
import time
from collections import deque

from aiohttp import web
from aiohttp_session import get_session, new_session

from pawwake.dashboard import dashboard_keys as dkeys
from pawwake.dashboard.i18n import request_language, translate
from pawwake.dashboard.render import render
from pawwake.dashboard.security import password_fingerprint, safe_next

log = logging.getLogger(__name__)


class LoginThrottle:
    """Failed logins per client address: a short pause after each, a lock-out after many."""

    def __init__(self, *, max_failures: int = 8, window_seconds: float = 15 * 60,
                 delay_seconds: float = 0.5, max_clients: int = 10_000) -> None:
        self.max_failures = max_failures
        self.window_seconds = window_seconds
        self.delay_seconds = delay_seconds
        self.max_clients = max_clients
        self._failures: dict[str, deque[float]] = {}

    def _recent(self, client: str, now: float) -> deque[float]:
        failures = self._failures.get(client, deque())
        while failures and now - failures[0] > self.window_seconds:
            failures.popleft()
        return failures

    def locked_for(self, client: str) -> float:
        """Seconds until ``client`` may try again (0 when it may try now)."""
        now = time.monotonic()
        failures = self._recent(client, now)
        if len(failures) < self.max_failures:
            return 0.0
        return max(0.0, self.window_seconds - (now - failures[0]))

    async def failed(self, client: str) -> None:
        now = time.monotonic()
        if len(self._failures) >= self.max_clients and client not in self._failures:
            self._forget_oldest(now)
        failures = self._recent(client, now)
        failures.append(now)
        self._failures[client] = failures
        await asyncio.sleep(self.delay_seconds)

    def succeeded(self, client: str) -> None:
        self._failures.pop(client, None)

    def _forget_oldest(self, now: float) -> None:
        for client in [c for c, f in self._failures.items() if not self._recent(c, now)]:
            del self._failures[client]
        while len(self._failures) >= self.max_clients:
            del self._failures[next(iter(self._failures))]


def _fingerprint(request: web.Request) -> str:
    app = request.app
    return password_fingerprint(app[dkeys.SESSION_SECRET], app[dkeys.PASSWORD])


async def is_authenticated(request: web.Request) -> bool:
    """A session from a login with the password in force now."""
    session = await get_session(request)
    stored = session.get("auth")
    return isinstance(stored, str) and hmac.compare_digest(stored, _fingerprint(request))


def _client_address(request: web.Request) -> str:
    return request.remote or "unknown"


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
    client = _client_address(request)
    wait = throttle.locked_for(client)
    if wait > 0:
        minutes = max(1, round(wait / 60))
        return _login_page(request, error=translate(lang, "login.locked", minutes=minutes),
                           status=429)
    form = await request.post()
    password = form.get("password")
    expected = request.app[dkeys.PASSWORD]
    if not isinstance(password, str) or not hmac.compare_digest(
            password.encode("utf-8"), expected.encode("utf-8")):
        log.warning("dashboard login failed from %s", client)
        await throttle.failed(client)
        return _login_page(request, error=translate(lang, "login.wrong"), status=401)
    throttle.succeeded(client)
    session = await new_session(request)  # whatever the old cookie held is dropped
    session["auth"] = _fingerprint(request)
    session["sid"] = secrets.token_urlsafe(24)
    session["login_at"] = int(time.time())
    log.info("dashboard login from %s", client)
    target = form.get("next")
    raise web.HTTPSeeOther(safe_next(target if isinstance(target, str) else None))


async def logout(request: web.Request) -> web.Response:
    session = await get_session(request)
    session.invalidate()
    location = request.app.router["login"].url_for().with_query(reason="signed_out")
    raise web.HTTPSeeOther(str(location))


def setup(dashboard: web.Application) -> None:
    dashboard[dkeys.LOGIN_THROTTLE] = LoginThrottle()
    dashboard.router.add_get("/login", login_form, name="login")
    dashboard.router.add_post("/login", login_submit, name="login_submit")
    dashboard.router.add_post("/logout", logout, name="logout")
