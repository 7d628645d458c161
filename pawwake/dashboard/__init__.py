"""The /dashboard sub-app: password login, pages and htmx partials."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import aiohttp_jinja2
import jinja2
from aiohttp import web
from aiohttp.typedefs import Middleware
from aiohttp_session import session_middleware

from pawwake.app_faces import STARTUP_SETTINGS, face_of
from pawwake.dashboard import (
    conversations,
    jobs,
    language,
    login,
    memories,
    status,
    threads,
    tryit,
    usage,
)
from pawwake.dashboard import dashboard_keys as dkeys
from pawwake.dashboard import settings as settings_page
from pawwake.dashboard.io import export_page, import_page
from pawwake.dashboard.middlewares import (
    errors_middleware,
    form_middleware,
    login_middleware,
    origin_middleware,
    plain_bodies_middleware,
    unavailable_middleware,
)
from pawwake.dashboard.security import (
    MIN_SECRET_LENGTH,
    PREFIX,
    DashboardCookieStorage,
    headers_middleware,
)
from pawwake.proxies import parse_trusted_proxies

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES_DIR = ROOT / "templates"
STATIC_DIR = ROOT / "static"

# Each page module registers its routes; a new page adds itself here and to nav.NAV.
PAGES = (login, language, status, settings_page, memories, import_page, export_page, conversations,
         usage, threads, jobs, tryit)


PROBLEM_SETTINGS = {"unavailable.password": "DASHBOARD_PASSWORD",
                    "unavailable.secret": f"SESSION_SECRET (at least {MIN_SECRET_LENGTH} characters)"}


def missing_settings(password: str, secret: str) -> tuple[str, ...]:
    """Catalog keys of what the dashboard still needs; empty when it can serve."""
    problems = []
    if not password:
        problems.append("unavailable.password")
    if len(secret) < MIN_SECRET_LENGTH:
        problems.append("unavailable.secret")
    return tuple(problems)


def static_urls(app: web.Application) -> Callable[[str], str]:
    """Serve ``static/`` at /static; URLs carry a content hash so browsers may cache them."""
    static = app.router.add_static("/static", STATIC_DIR, name="static", append_version=True)
    known: dict[str, str] = {}

    def static_url(name: str) -> str:
        if name not in known:
            known[name] = str(static.url_for(filename=name))
        return known[name]

    return static_url


class _TemplateCode(jinja2.BytecodeCache):
    """Compiled templates kept for the process: every app built here (the tests build one a
    test) compiles each template once, not once per app. Jinja checks the source's checksum."""

    def __init__(self) -> None:
        self._code: dict[str, bytes] = {}

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        code = self._code.get(bucket.key)
        if code is not None:
            bucket.bytecode_from_string(code)

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        self._code[bucket.key] = bucket.bytecode_to_string()


_TEMPLATE_CODE = _TemplateCode()


def setup_dashboard(app: web.Application) -> None:
    """Mount the dashboard under /dashboard and serve /static for it."""
    settings = face_of(app, STARTUP_SETTINGS)
    password, secret = settings.DASHBOARD_PASSWORD, settings.SESSION_SECRET
    problems = missing_settings(password, secret)
    middlewares: list[Middleware]
    if problems:
        log.warning("dashboard answers 503 until set: %s",
                    ", ".join(PROBLEM_SETTINGS[p] for p in problems))
        middlewares = [headers_middleware, unavailable_middleware]
    else:
        middlewares = [headers_middleware, session_middleware(DashboardCookieStorage(secret)),
                       errors_middleware, plain_bodies_middleware, origin_middleware,
                       login_middleware, form_middleware]
    dashboard = web.Application(middlewares=middlewares)
    dashboard[dkeys.PROBLEMS] = problems
    dashboard[dkeys.PASSWORD] = password
    dashboard[dkeys.SESSION_SECRET] = secret
    dashboard[dkeys.PROXIES] = parse_trusted_proxies(settings.TRUSTED_PROXIES)
    aiohttp_jinja2.setup(dashboard, loader=jinja2.FileSystemLoader(TEMPLATES_DIR),
                         autoescape=True, undefined=jinja2.StrictUndefined,
                         trim_blocks=True, lstrip_blocks=True, bytecode_cache=_TEMPLATE_CODE)
    for page in PAGES:
        page.setup(dashboard)
    dashboard[dkeys.STATIC_URL] = static_urls(app)
    app.add_subapp(PREFIX, dashboard)
    app[dkeys.APP] = dashboard
