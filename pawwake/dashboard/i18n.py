"""The dashboard's translation function and language choice; the strings themselves live in
``strings/<lang>.json`` (Simplified Chinese is the default, English the switch)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from aiohttp import web

from pawwake.dashboard import dashboard_keys as dkeys

DEFAULT_LANGUAGE = "zh"
LANGUAGES: tuple[str, ...] = ("zh", "en")
LANGUAGE_COOKIE = "pawwake_lang"
STRINGS_DIR = Path(__file__).with_name("strings")


def load_strings(directory: Path = STRINGS_DIR) -> dict[str, dict[str, str]]:
    """Every language's catalog, read once when the dashboard is imported."""
    return {lang: json.loads((directory / f"{lang}.json").read_text(encoding="utf-8"))
            for lang in LANGUAGES}


STRINGS: dict[str, dict[str, str]] = load_strings()

Translator = Callable[..., str]


def translate(lang: str, key: str, **values: object) -> str:
    """The string for ``key`` in ``lang``; a missing key shows itself rather than failing."""
    text = STRINGS.get(lang, STRINGS[DEFAULT_LANGUAGE]).get(key)
    if text is None:
        text = STRINGS[DEFAULT_LANGUAGE].get(key, key)
    return text.format(**values) if values else text


def translator(lang: str) -> Translator:
    """A ``t(key, **values)`` bound to one language, for templates."""

    def t(key: str, **values: object) -> str:
        return translate(lang, key, **values)

    return t


def request_language(request: web.Request) -> str:
    """The visitor's language: the language cookie when valid, else Simplified Chinese."""
    if dkeys.LANGUAGE in request:
        return request[dkeys.LANGUAGE]
    chosen = request.cookies.get(LANGUAGE_COOKIE, DEFAULT_LANGUAGE)
    lang = chosen if chosen in LANGUAGES else DEFAULT_LANGUAGE
    request[dkeys.LANGUAGE] = lang
    return lang
