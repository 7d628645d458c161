"""Service refusals worded at the dashboard's edge: services raise English messages with a
code (for the API and logs); pages show the code's text in the reader's language."""

from __future__ import annotations

from pawwake.api_error import ApiError
from pawwake.dashboard.i18n import STRINGS, translate
from pawwake.db.errors import Conflict

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
