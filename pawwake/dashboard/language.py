"""The language switch: a cookie remembered for a year, readable before login."""

from __future__ import annotations

from aiohttp import web

from pawwake.dashboard.i18n import LANGUAGE_COOKIE, LANGUAGES
from pawwake.dashboard.public_form import public_form
from pawwake.dashboard.security import PREFIX, request_scheme, safe_next

ONE_YEAR = 365 * 24 * 60 * 60


async def switch_language(request: web.Request) -> web.Response:
    form = public_form(request)
    lang = form.get("lang")
    if lang not in LANGUAGES:
        raise web.HTTPBadRequest(text="Unknown language.")
    target = form.get("next")
    response = web.HTTPSeeOther(safe_next(target if isinstance(target, str) else None))
    response.set_cookie(LANGUAGE_COOKIE, str(lang), max_age=ONE_YEAR, path=PREFIX,
                        httponly=True, samesite="Strict",
                        secure=request_scheme(request) == "https")
    raise response


def setup(dashboard: web.Application) -> None:
    dashboard.router.add_post("/language", switch_language, name="language")
