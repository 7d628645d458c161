"""One entry of the settings table: its kind, default, group, help in both languages and
limits (``Setting``, declared with ``setting``), and the error a value that does not fit it
raises."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar, cast, overload

T = TypeVar("T")


class SettingError(ValueError):
    """A value that does not fit its setting (wrong type, out of range, unknown key)."""

    def __init__(self, name: str, message: str, code: str = "invalid",
                 **values: Any) -> None:
        super().__init__(f"{name}: {message}")
        self.name = name
        self.message = message  # English, for the API and logs
        self.code = code  # for the dashboard, which words it in the reader's language
        self.values = values


@dataclass(frozen=True)
class Setting(Generic[T]):
    """One configuration value: its type, default and documentation; its environment name is
    the attribute it is given in the table (``Settings``), where it also tells the type
    checker the type of ``settings.NAME``."""

    kind: str  # "str" | "url" | "optional_url" | "int" | "float" | "bool" | "choice" |
    #            "optional_float"
    default: T
    group: str
    help_zh: str
    help_en: str
    hot: bool = True
    secret: bool = False
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    multiline: bool = False
    model_picker: bool = False
    max_chars: int | None = None  # text settings: the longest value accepted
    required: bool = False  # a "str" that may not be empty
    # Decides where a provider key is sent (a base URL, a key): changed only from a dashboard
    # session or with ADMIN_SECRET, never with the gateway key every chat client carries.
    admin: bool = False
    name: str = field(default="", init=False)

    def __set_name__(self, owner: type, name: str) -> None:
        object.__setattr__(self, "name", name)

    @overload
    def __get__(self, snapshot: None, owner: type) -> Setting[T]: ...

    @overload
    def __get__(self, snapshot: Mapping[str, Any], owner: type) -> T: ...

    def __get__(self, snapshot: Mapping[str, Any] | None, owner: type) -> Setting[T] | T:
        """The value in a snapshot (each snapshot holds its values as its own attributes,
        so this runs only for the class: ``Settings.PORT`` is the table's entry)."""
        if snapshot is None:
            return self
        return cast(T, snapshot[self.name])


# One per kind, so each entry's type (its default's, and what ``settings.NAME`` reads as)
# follows from its kind.
@overload
def setting(kind: Literal["str", "url", "optional_url", "choice"], default: str, group: str,
            zh: str, en: str, **extra: Any) -> Setting[str]: ...
@overload
def setting(kind: Literal["bool"], default: bool, group: str, zh: str, en: str,
            **extra: Any) -> Setting[bool]: ...
@overload
def setting(kind: Literal["int"], default: int, group: str, zh: str, en: str,
            **extra: Any) -> Setting[int]: ...
@overload
def setting(kind: Literal["float"], default: float, group: str, zh: str, en: str,
            **extra: Any) -> Setting[float]: ...
@overload
def setting(kind: Literal["optional_float"], default: float | None, group: str, zh: str,
            en: str, **extra: Any) -> Setting[float | None]: ...
def setting(kind: str, default: Any, group: str, zh: str, en: str, **extra: Any
            ) -> Setting[Any]:
    return Setting(kind, default, group, zh, en, **extra)
