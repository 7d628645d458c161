"""The dashboard's middlewares: not-configured page, friendly errors (the one place an error
is answered), plain bodies, origin check, login, forms."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

from pawwake.dashboard import dashboard_keys as dkeys
from pawwake.dashboard.i18n import LANGUAGES, request_language, translate, translator
from pawwake.dashboard.login import is_authenticated
from pawwake.dashboard.public_form import PublicFormRefused, read_public_form
from pawwake.dashboard.refusals import PageRefusal, Refused, refusal_of
from pawwake.dashboard.render import is_htmx, render, render_error
from pawwake.dashboard.security import SAFE_METHODS, client_view, is_same_origin
from pawwake.db.pool import UNAVAILABLE_ERRORS
from pawwake.db.statement_bounds import StatementTimeout
from pawwake.middlewares import note_unreachable
from pawwake.proxies import setting_to_trust
from pawwake.request_body import content_encoding

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

# Pages anyone may open: the login form and the language switch (it only sets a cookie).
PUBLIC_ROUTES = frozenset({"login", "login_submit", "language"})


@web.middleware
async def unavailable_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Installed instead of everything else when a required setting is missing: always 503."""
    context = {"problems": request.app[dkeys.PROBLEMS],
               "translations": {lang: translator(lang) for lang in LANGUAGES}}
    return render(request, "unavailable.html", context, status=503)


@web.middleware
async def plain_bodies_middleware(request: web.Request, handler: Handler
                                  ) -> web.StreamResponse:
    """A compressed body is refused unread (see ``request_body``), on every dashboard route.
    The one refusal answered here and not by the error path: anyone may send it in a flood and
    no browser ever does, so it gets one line of text instead of a rendered page (under 8
    clients sending gzip bombs back to back, a page each took ``GET /`` p99 from 30 to 170 ms;
    ``bench/faults.py --mode public-attack``)."""
    if content_encoding(request) is None:
        return await handler(request)
    return web.Response(status=415, text=translate(request_language(request), "error.encoding"),
                        headers={"Accept-Encoding": "identity"})


@web.middleware
async def errors_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The dashboard's one error path: whatever a page or a middleware inside this one raises
    (a ``PageRefusal``, a service's refusal, the database away, a bug) becomes an error page or
    htmx fragment in the visitor's language (``refusals.refusal_of``), never a trace."""
    lang = request_language(request)
    try:
        return await handler(request)
    except web.HTTPNotFound:
        answer = Refused(404, translate(lang, "error.not_found"))
    except web.HTTPMethodNotAllowed:
        answer = Refused(405, translate(lang, "error.method"))
    except web.HTTPException:
        raise
    except StatementTimeout:
        log.warning("a statement of dashboard %s %s ran into its time bound", request.method,
                    request.path)
        answer = Refused(503, translate(lang, "error.database_slow"))
    except Exception as exc:
        answer = refusal_of(request, exc) or _failure(request, exc, lang)
    response = render_error(request, answer.status, answer.message)
    response.headers.update(answer.headers)
    return response


def _failure(request: web.Request, exc: Exception, lang: str) -> Refused:
    """The answer to what no page refused: the database away (503), else a bug (500)."""
    if isinstance(exc, UNAVAILABLE_ERRORS):
        note_unreachable(request.config_dict, exc)
        log.warning("database unavailable on dashboard %s %s (%s)", request.method,
                    request.path, type(exc).__name__)
        return Refused(503, translate(lang, "error.database"))
    log.error("dashboard error on %s %s", request.method, request.path, exc_info=exc)
    return Refused(500, translate(lang, "error.internal"))


@web.middleware
async def origin_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every write must come from a page of this very site (scheme and host, proxy-aware)."""
    if request.method not in SAFE_METHODS and not is_same_origin(request):
        log.warning("refused a cross-origin dashboard %s to %s", request.method, request.path)
        if client_view(request).forwarded_ignored:
            # Behind a proxy nobody said to trust, the browser's https address is unknown
            # here, so every sign-in looks cross-origin: say exactly what to set.
            setting = setting_to_trust(request.remote)
            log.warning("forwarded headers from %s were ignored: that address is not in "
                        "TRUSTED_PROXIES (behind a reverse proxy such as Render's, set %s)",
                        request.remote, setting)
            raise PageRefusal("error.origin_proxy", 403, setting=setting)
        raise PageRefusal("error.origin", 403)
    return await handler(request)


# What aiohttp raises for a form it cannot read: a multipart body without a boundary
# (KeyError) or with a broken one (ValueError, AssertionError), a field that is not UTF-8.
MALFORMED_FORM = (ValueError, KeyError, AssertionError, UnicodeDecodeError)


@web.middleware
async def form_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Read a posted form once, up front: one the browser could not have sent is a 400 page
    instead of a crash in the handler (which gets the same, cached, form). The public routes'
    forms are read with their own small cap (``public_form``)."""
    if request.method == "POST" and request.match_info.route.name in PUBLIC_ROUTES:
        try:
            await read_public_form(request)
        except PublicFormRefused as refused:
            log.warning("refused a public form on %s (%d)", request.path, refused.status)
            raise PageRefusal(refused.message_key, refused.status) from None
    elif request.method == "POST":
        try:
            await request.post()
        except MALFORMED_FORM as exc:
            log.warning("refused an unreadable form on %s (%s)", request.path,
                        type(exc).__name__)
            raise PageRefusal("error.bad_form") from None
    return await handler(request)


@web.middleware
async def login_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Everything but the public routes needs a login; htmx is told where to go instead."""
    authenticated = await is_authenticated(request)
    request[dkeys.AUTHENTICATED] = authenticated
    if authenticated or request.match_info.route.name in PUBLIC_ROUTES:
        return await handler(request)
    login = request.app.router["login"].url_for()
    if is_htmx(request):
        raise PageRefusal("login.required", 401,
                          headers={"HX-Redirect": str(login.with_query(reason="expired"))})
    if request.method in SAFE_METHODS:
        raise web.HTTPSeeOther(str(login.with_query(next=request.path_qs)))
    raise web.HTTPSeeOther(str(login.with_query(reason="expired")))
