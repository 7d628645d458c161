"""How a dashboard page reaches the gateway's services: the gateway app, and service refusals
shown as error pages (404 / 409 / 400) instead of a stack trace."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable

from aiohttp import web

from pawwake.api_error import ApiError
from pawwake.dashboard.i18n import request_language, translate
from pawwake.dashboard.refusals import conflict_reason, invalid_text
from pawwake.dashboard.render import render_error
from pawwake.dashboard.settings.errors import setting_error_text
from pawwake.db.errors import Conflict, NotFound
from pawwake.settings import SettingError
from pawwake.sub_apps import gateway

__all__ = ["gateway", "refusals_as_pages"]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def refusals_as_pages(catalog_prefix: str) -> Callable[[Handler], Handler]:
    """Show a service's refusals as an error page (404 / 409 / 400), never a stack trace.

    Messages come from ``<catalog_prefix>.error_missing`` and ``.error_conflict``."""

    def decorate(handler: Handler) -> Handler:
        @functools.wraps(handler)
        async def wrapper(request: web.Request) -> web.StreamResponse:
            lang = request_language(request)
            try:
                return await handler(request)
            except NotFound:
                return render_error(request, 404,
                                    translate(lang, f"{catalog_prefix}.error_missing"))
            except Conflict as exc:
                return render_error(request, 409, translate(
                    lang, f"{catalog_prefix}.error_conflict", reason=conflict_reason(lang, exc)))
            except ApiError as exc:
                return render_error(request, 400, invalid_text(lang, exc))
            except SettingError as exc:
                return render_error(request, 400, setting_error_text(lang, exc))

        return wrapper

    return decorate
