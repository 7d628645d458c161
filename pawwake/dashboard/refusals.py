"""Service refusals worded at the dashboard's edge: services raise English messages with a
code (for the API and logs); pages show the code's text in the reader's language, as error
pages (400 / 404 / 409 / 503) instead of a stack trace (``refusals_as_pages``)."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable

from aiohttp import web

from pawwake.api_error import ApiError
from pawwake.dashboard.i18n import STRINGS, request_language, translate
from pawwake.dashboard.render import render_error
from pawwake.dashboard.settings.errors import setting_error_text
from pawwake.db.errors import Conflict, DatabaseUnavailable, NotFound
from pawwake.settings import SettingError

# ``session_id_of(value, name)`` raises ``invalid_<name>`` for any of these id fields.
ID_FIELDS = ("session_id", "session", "target_id", "new_id", "old_id", "thread_id", "thread",
             "inherit", "inherit_summary_from", "summary")


class PageRefusal(ValueError):
    """Input a page cannot use (a view parameter, a form, an upload): ``key`` is the catalog
    key of the explanation, ``status`` the answer's (400 unless said)."""

    def __init__(self, key: str, status: int = 400) -> None:
        super().__init__(key)
        self.key = key
        self.status = status


def known(lang: str, key: str) -> bool:
    return key in STRINGS.get(lang, STRINGS["zh"])


def conflict_reason(lang: str, exc: Conflict) -> str:
    """The reason a write clashed; the English message only for a clash without a code."""
    key = f"conflict.{exc.code}"
    if exc.code and known(lang, key):
        values = dict(exc.values)
        if "status" in values and known(lang, f"jobs_state.{values['status']}"):
            values["status"] = translate(lang, f"jobs_state.{values['status']}")
        return translate(lang, key, **values)
    return str(exc)


def invalid_text(lang: str, exc: ApiError) -> str:
    """Why the input cannot be used, never the English API message."""
    key = f"invalid.{exc.code}"
    if known(lang, key):
        return translate(lang, key)
    if exc.code.removeprefix("invalid_") in ID_FIELDS:
        return translate(lang, "invalid.id")
    return translate(lang, "invalid.other")


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
