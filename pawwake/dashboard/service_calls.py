"""How a dashboard page reaches the gateway's services: the gateway app, and service refusals
shown as error pages (404 / 409 / 400) instead of a stack trace."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable

from aiohttp import web

from pawwake.api_error import ApiError
from pawwake.dashboard.i18n import request_language, translate
from pawwake.dashboard.refusals import PageRefusal, conflict_reason, invalid_text, known
from pawwake.dashboard.render import render_error
from pawwake.dashboard.settings.errors import setting_error_text
from pawwake.db.errors import Conflict, DatabaseUnavailable, NotFound
from pawwake.settings import SettingError
from pawwake.sub_apps import gateway

__all__ = ["gateway", "refusals_as_pages"]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def refusals_as_pages(catalog_prefix: str) -> Callable[[Handler], Handler]:
    """Show a service's refusals as an error page (400 / 404 / 409 / 503), never a stack trace:
    the dashboard's counterpart of the API's error middleware, in the reader's language.

    Messages come from ``<catalog_prefix>.error_missing``, ``.error_conflict`` and
    ``.no_database``; a refusal the feature's catalog has no words for is left to the
    dashboard's errors middleware (a generic page)."""

    def decorate(handler: Handler) -> Handler:
        @functools.wraps(handler)
        async def wrapper(request: web.Request) -> web.StreamResponse:
            lang = request_language(request)
            try:
                return await handler(request)
            except PageRefusal as exc:
                return render_error(request, exc.status, translate(lang, exc.key))
            except NotFound:
                return render_error(request, 404,
                                    translate(lang, f"{catalog_prefix}.error_missing"))
            except Conflict as exc:
                if not known(lang, f"{catalog_prefix}.error_conflict"):
                    raise
                return render_error(request, 409, translate(
                    lang, f"{catalog_prefix}.error_conflict", reason=conflict_reason(lang, exc)))
            except ApiError as exc:
                return render_error(request, exc.status, invalid_text(lang, exc))
            except SettingError as exc:
                return render_error(request, 400, setting_error_text(lang, exc))
            except DatabaseUnavailable:
                if not known(lang, f"{catalog_prefix}.no_database"):
                    raise
                return render_error(request, 503,
                                    translate(lang, f"{catalog_prefix}.no_database"))

        return wrapper

    return decorate
