"""A refused setting value, worded in the reader's language from the error's code."""

from __future__ import annotations

from pawwake.dashboard.i18n import translate
from pawwake.settings import SettingError


def setting_error_text(lang: str, exc: SettingError) -> str:
    return translate(lang, f"setting_error.{exc.code}", **exc.values)
