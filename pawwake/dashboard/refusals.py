"""Refusals worded at the dashboard's edge: services raise English messages with a code (for
the API and logs), pages raise ``PageRefusal`` with a catalog key; the errors middleware shows
either in the reader's language, as an error page or htmx fragment (400 / 404 / 409 / 503)
instead of a stack trace (``refusal_of``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from aiohttp import web

from pawwake.api_error import ApiError
from pawwake.dashboard.i18n import STRINGS, request_language, translate
from pawwake.db.errors import Conflict, DatabaseUnavailable, NotFound
from pawwake.settings.entry import SettingError

# ``session_id_of(value, name)`` raises ``invalid_<name>`` for any of these id fields.
ID_FIELDS = ("session_id", "session", "target_id", "new_id", "old_id", "thread_id", "thread",
             "inherit", "inherit_summary_from", "summary")


class PageRefusal(ValueError):
    """What a page refuses (input it cannot use, a form the browser should not have sent, a
    write that clashes): ``key`` is the catalog key of the explanation and ``values`` fill it
    in, ``status`` is the answer's (400 unless said), ``headers`` any it needs besides. Raised
    anywhere in a dashboard request, it is rendered by ``middlewares.errors_middleware``."""

    def __init__(self, key: str, status: int = 400, *,
                 headers: Mapping[str, str] | None = None, **values: object) -> None:
        super().__init__(key)
        self.key = key
        self.status = status
        self.headers = dict(headers or {})
        self.values = values


# Dashboard features whose pages word "not found", "clashes" and "no database" their own way
# (``<catalog>.error_missing``, ``.error_conflict``, ``.no_database``), by the package of the
# page's handler (``dashboard/<feature>/``) and the prefix of the feature's catalog keys.
FEATURE_CATALOGS = {"memories": "memories", "conversations": "conv", "threads": "threads",
                    "jobs": "jobs"}


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


def setting_error_text(lang: str, exc: SettingError) -> str:
    """A refused setting value, worded from the error's code."""
    return translate(lang, f"setting_error.{exc.code}", **exc.values)


def invalid_text(lang: str, exc: ApiError) -> str:
    """Why the input cannot be used, never the English API message."""
    key = f"invalid.{exc.code}"
    if known(lang, key):
        return translate(lang, key)
    if exc.code.removeprefix("invalid_") in ID_FIELDS:
        return translate(lang, "invalid.id")
    return translate(lang, "invalid.other")


def feature_catalog(request: web.Request) -> str | None:
    """The catalog prefix of the feature whose page answers ``request``, if it has one."""
    module = getattr(request.match_info.handler, "__module__", "") or ""
    parts = module.split(".")
    if len(parts) < 4 or parts[:2] != ["pawwake", "dashboard"]:
        return None
    return FEATURE_CATALOGS.get(parts[2])


@dataclass(frozen=True)
class Refused:
    """How a refusal is answered: its status, its words in the reader's language, headers."""

    status: int
    message: str
    headers: Mapping[str, str] = field(default_factory=dict)


def refusal_of(request: web.Request, exc: Exception) -> Refused | None:
    """A page's or a service's refusal as the page's answer (the English message of a service
    stays in the API and the logs). ``None`` for anything that is no refusal (a database away
    the feature has no words for, a bug): the errors middleware's own answers."""
    lang = request_language(request)
    catalog = feature_catalog(request)
    if isinstance(exc, PageRefusal):
        return Refused(exc.status, translate(lang, exc.key, **exc.values), exc.headers)
    if isinstance(exc, NotFound):
        return Refused(404, translate(lang, f"{catalog}.error_missing" if catalog
                                      else "error.not_found"))
    if isinstance(exc, Conflict):
        if catalog is None or not known(lang, f"{catalog}.error_conflict"):
            return None
        return Refused(409, translate(lang, f"{catalog}.error_conflict",
                                      reason=conflict_reason(lang, exc)))
    if isinstance(exc, ApiError):
        return Refused(exc.status, invalid_text(lang, exc))
    if isinstance(exc, SettingError):
        return Refused(400, setting_error_text(lang, exc))
    if isinstance(exc, DatabaseUnavailable) and catalog is not None \
            and known(lang, f"{catalog}.no_database"):
        return Refused(503, translate(lang, f"{catalog}.no_database"))
    return None
