"""Typed keys for the dashboard sub-app's own state and per-request values."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from aiohttp import web
from multidict import MultiDictProxy

if TYPE_CHECKING:
    from pawwake.dashboard.login_throttle import LoginThrottle
    from pawwake.dashboard.session_revocations import SessionRevocations
    from pawwake.proxies import ClientView, TrustedProxies

APP: web.AppKey[web.Application] = web.AppKey("dashboard_app")  # on the main app

# Settings the dashboard still needs (empty when it can serve); each a catalog key.
PROBLEMS: web.AppKey[tuple[str, ...]] = web.AppKey("dashboard_problems")
PASSWORD: web.AppKey[str] = web.AppKey("dashboard_password")
SESSION_SECRET: web.AppKey[str] = web.AppKey("dashboard_session_secret")
LOGIN_THROTTLE: web.AppKey[LoginThrottle] = web.AppKey("dashboard_login_throttle")
PROXIES: web.AppKey[TrustedProxies] = web.AppKey("dashboard_trusted_proxies")
REVOCATIONS: web.AppKey[SessionRevocations] = web.AppKey("dashboard_revoked_sessions")
STATIC_URL: web.AppKey[Callable[[str], str]] = web.AppKey("dashboard_static_url")  # name -> URL

LANGUAGE: web.RequestKey[str] = web.RequestKey("dashboard_language", str)
AUTHENTICATED: web.RequestKey[bool] = web.RequestKey("dashboard_authenticated", bool)
CLIENT_VIEW: web.RequestKey[ClientView] = web.RequestKey("dashboard_client_view")
# The login or language form, read with the public routes' small cap (public_form.py).
PUBLIC_FORM: web.RequestKey[MultiDictProxy[str]] = web.RequestKey("dashboard_public_form")
