"""What in the settings in force keeps the gateway from working: said on the status page and
in the start-up log, before a chat fails on it."""

from __future__ import annotations

from dataclasses import dataclass

from pawwake.llm.embeddings import provider_for
from pawwake.llm.models import provider_of
from pawwake.settings import SETTINGS, Settings
from pawwake.settings.entry import SettingError
from pawwake.settings.values import parse_value

# Providers that answer 401 without a key (a local one, such as Ollama, needs none).
KEYED_PROVIDERS = frozenset({"openrouter", "openai", "google"})


@dataclass(frozen=True)
class Problem:
    setting: str
    code: str  # the dashboard words it: config_problem.<code>
    level: str  # "error": nothing works this way; "warning": it may, depending on the provider

    def english(self) -> str:
        return f"{self.setting}: {ENGLISH[self.code]}"


ENGLISH = {
    "not_a_url": "not an http(s) URL with a host; no request can reach the provider",
    "empty": "empty; requests that name no model are refused",
    "missing_key": "empty; this provider refuses every request without a key",
    "no_key": "empty; fine for a local provider (Ollama), any other answers 401",
    "embedding_key": "empty while EMBEDDING_PROVIDER=api; memory vectors cannot be made",
}


def configuration_problems(settings: Settings) -> list[Problem]:
    problems = []
    for setting in SETTINGS:
        if setting.kind in ("url", "optional_url") or setting.required:
            try:
                parse_value(setting, settings[setting.name])
            except SettingError as exc:
                problems.append(Problem(setting.name, "empty" if exc.code == "empty"
                                        else "not_a_url", "error"))
    if not settings.API_KEY and not any(p.setting == "API_BASE_URL" for p in problems):
        keyed = provider_of(settings.api_base) in KEYED_PROVIDERS
        problems.append(Problem("API_KEY", "missing_key" if keyed else "no_key",
                                "error" if keyed else "warning"))
    if settings.MEMORY_VECTOR_ENABLED and provider_for(settings) == "api" \
            and not settings.EMBEDDING_API_KEY:
        problems.append(Problem("EMBEDDING_API_KEY", "embedding_key", "error"))
    return problems
