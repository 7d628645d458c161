"""The settings: a snapshot of every value (``Settings``), the table in order and by name.

The table is ``settings.table`` (every entry, typed by its kind), an entry's declaration
``settings.entry``, how a value is read ``settings.values``, what of a secret may be shown
``settings.secrets``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pawwake.settings.entry import Setting, SettingError
from pawwake.settings.table import SettingsTable
from pawwake.settings.values import parse_value

GROUPS: tuple[str, ...] = ("basic", "memory", "partition", "vector", "recall", "advanced")
# The folder pawwake.py lives in: a relative PAWWAKE_DATA_DIR is taken from here, so starting
# the program from another folder never starts a new, empty database somewhere else.
PROGRAM_DIR = Path(__file__).resolve().parent.parent.parent


class Settings(SettingsTable, Mapping[str, Any]):
    """An immutable snapshot of every setting's value (the table, ``SettingsTable``, is
    inherited: ``Settings.API_KEY`` is the entry itself, ``settings.API_KEY`` its value).

    The mapping form (``settings["API_KEY"]``) serves code that walks the table by name (the
    settings page and API).
    """

    def __init__(self, values: Mapping[str, Any]) -> None:
        unknown = set(values) - set(BY_NAME)
        if unknown:
            raise SettingError(sorted(unknown)[0], "unknown setting", "unknown")
        resolved = {s.name: values.get(s.name, s.default) for s in SETTINGS}
        resolved["PAWWAKE_DATA_DIR"] = data_folder(resolved["PAWWAKE_DATA_DIR"])
        self._values: dict[str, Any]  # declared here, out of the class's setting attributes
        object.__setattr__(self, "_values", resolved)
        for name, value in resolved.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Settings is immutable; use with_values()")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Defaults, then the environment, then explicit keyword overrides (already typed)."""
        environ = os.environ if environ is None else environ
        values = {s.name: parse_value(s, environ[s.name]) for s in SETTINGS if s.name in environ}
        values.update(overrides)
        return cls(values)

    def with_values(self, changes: Mapping[str, Any]) -> Settings:
        return Settings({**self._values, **changes})

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    @property
    def database_on(self) -> bool:
        return self.DATABASE_ENABLED

    @property
    def chat_completions_url(self) -> str:
        """API_BASE_URL may be a base (``…/v1``) or the full endpoint; return the endpoint."""
        base = self.API_BASE_URL.rstrip("/")
        if base.endswith("/chat/completions"):
            return base
        return base + "/chat/completions"

    @property
    def responses_url(self) -> str:
        """RESPONSES_BASE_URL (a base or the full endpoint), else the chat provider's base +
        ``/responses`` (OpenRouter: ``…/api/v1/responses``, OpenAI: ``…/v1/responses``)."""
        base = self.RESPONSES_BASE_URL.strip().rstrip("/") or self.api_base
        return base if base.endswith("/responses") else base + "/responses"

    @property
    def api_base(self) -> str:
        """The provider's base URL (``…/v1``), for ``/models`` and the like."""
        url = self.chat_completions_url
        return url[: -len("/chat/completions")]


# The table's entries in order, and by name.
SETTINGS: tuple[Setting[Any], ...] = tuple(
    entry for entry in vars(SettingsTable).values() if isinstance(entry, Setting))
BY_NAME: dict[str, Setting[Any]] = {entry.name: entry for entry in SETTINGS}


def environment_errors(environ: Mapping[str, str]) -> list[SettingError]:
    """Every value in ``environ`` that no setting would take, and ADMIN_SECRET when it is the
    gateway key itself (it would protect nothing every client does not already hold)."""
    errors: list[SettingError] = []
    for setting in SETTINGS:
        if setting.name in environ:
            try:
                parse_value(setting, environ[setting.name])
            except SettingError as exc:
                errors.append(exc)
    admin, gateway = environ.get("ADMIN_SECRET", "").strip(), \
        environ.get("GATEWAY_SECRET", "").strip()
    if admin and admin == gateway:
        errors.append(SettingError("ADMIN_SECRET", "must differ from GATEWAY_SECRET",
                                   "same_as_gateway"))
    return errors


def data_folder(value: str) -> str:
    """PAWWAKE_DATA_DIR as an absolute path: ``~`` expanded, a relative one from PROGRAM_DIR."""
    path = Path(value).expanduser()
    return str(path if path.is_absolute() else PROGRAM_DIR / path)
