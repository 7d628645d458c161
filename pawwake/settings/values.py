"""Reading a setting's value from the environment or a JSON body: its kind's type, within its
limits, or a ``SettingError`` that says what fits."""

from __future__ import annotations

import math
from typing import Any
from urllib.parse import urlsplit

from pawwake.settings.entry import Setting, SettingError

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def parse_value(setting: Setting[Any], raw: Any) -> Any:
    """Turn an environment string or a JSON value into the setting's type, or raise."""
    kind = setting.kind
    if kind == "bool":
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.strip().lower() in _TRUE | _FALSE:
            return raw.strip().lower() in _TRUE
        raise SettingError(setting.name, "expected true or false", "expected_bool")
    if kind in ("int", "float", "optional_float"):
        if kind == "optional_float" and (raw is None or (isinstance(raw, str) and not raw.strip())):
            return None
        value = _parse_number(setting, raw, integer=kind == "int")
        if setting.minimum is not None and value < setting.minimum:
            raise SettingError(setting.name, f"must be at least {setting.minimum:g}", "too_small",
                               limit=f"{setting.minimum:g}")
        if setting.maximum is not None and value > setting.maximum:
            raise SettingError(setting.name, f"must be at most {setting.maximum:g}", "too_large",
                               limit=f"{setting.maximum:g}")
        return value
    if not isinstance(raw, str):
        raise SettingError(setting.name, "expected a string", "expected_text")
    if kind == "choice":
        choice = raw.strip()
        if choice not in setting.choices:
            raise SettingError(setting.name, "must be one of " + ", ".join(
                repr(c) for c in setting.choices), "not_a_choice",
                choices=" / ".join(setting.choices))
        return choice
    if kind in ("url", "optional_url"):
        return _parse_url(setting, raw.strip())
    text = raw if setting.multiline else raw.strip()
    if setting.required and not text.strip():
        raise SettingError(setting.name, "must not be empty", "empty")
    if setting.max_chars is not None and len(text) > setting.max_chars:
        raise SettingError(setting.name, f"is limited to {setting.max_chars:,} characters "
                           f"({len(text):,} given)", "too_long", limit=f"{setting.max_chars:,}")
    return text


def _parse_url(setting: Setting[Any], text: str) -> str:
    """An http(s) URL with a host (empty for an optional one); no credentials in it, since a
    URL is shown in full wherever settings are (keys have settings of their own)."""
    if not text and setting.kind == "optional_url":
        return ""
    try:
        parts = urlsplit(text)
        usable = (parts.scheme in ("http", "https") and bool(parts.hostname)
                  and not any(c.isspace() for c in text) and parts.port != 0)
    except ValueError:
        usable = False
    if not usable:
        raise SettingError(setting.name, "must be an http:// or https:// URL with a host, like "
                                         "https://openrouter.ai/api/v1", "not_a_url")
    if parts.username is not None or parts.password is not None:
        raise SettingError(setting.name, "must not carry a user name or password; put the key "
                                         "in its API key setting", "url_credentials")
    return text


def _parse_number(setting: Setting[Any], raw: Any, *, integer: bool) -> float | int:
    if isinstance(raw, bool):
        raise SettingError(setting.name, "expected a number", "expected_number")
    if isinstance(raw, str):
        try:
            raw = int(raw.strip()) if integer else float(raw.strip())
        except ValueError:
            raise SettingError(setting.name, "expected a number", "expected_number") from None
    if integer:
        if isinstance(raw, float) and raw.is_integer():
            raw = int(raw)
        if not isinstance(raw, int):
            raise SettingError(setting.name, "expected a whole number", "expected_integer")
        return raw
    if not isinstance(raw, (int, float)) or not math.isfinite(raw):
        raise SettingError(setting.name, "expected a number", "expected_number")
    return float(raw)
