"""Settings are read as typed attributes, and the types come from the table itself: each
entry's kind gives the type of its default and of ``settings.NAME``, for the code and for the
type checker alike (there is no list of attributes to keep in step with the table)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from pawwake.settings import BY_NAME, SETTINGS, Settings
from tests.test_typecheck import run_mypy

pytestmark = pytest.mark.xdist_group("mypy")  # shares the type check's cache folder

PYTHON_TYPES: dict[str, type | tuple[type, ...]] = {
    "str": str, "url": str, "optional_url": str, "choice": str, "int": int,
    "float": (float, int), "bool": bool, "optional_float": (float, int, type(None))}
# What mypy's reveal_type says of ``settings.NAME`` for each kind.
REVEALED = {"str": "str", "url": "str", "optional_url": "str", "choice": "str", "int": "int",
            "float": "float", "bool": "bool", "optional_float": "float | None"}


def test_every_entry_reads_as_an_attribute_of_its_kind() -> None:
    settings = Settings.from_env({})
    assert [s.name for s in SETTINGS] == list(settings) and len(SETTINGS) > 60
    for setting in SETTINGS:
        value = getattr(settings, setting.name)
        assert isinstance(value, PYTHON_TYPES[setting.kind]), setting.name
        assert getattr(Settings, setting.name) is BY_NAME[setting.name]  # the entry itself


def test_the_type_checker_reads_each_setting_with_its_kinds_type(tmp_path: Path) -> None:
    # A module name of its own each run: the shared cache would otherwise answer for the
    # previous run's file (another path) and report nothing for this one.
    probe = tmp_path / f"settings_probe_{uuid.uuid4().hex}.py"
    lines = ["from pawwake.settings import Settings", "s = Settings.from_env({})"]
    lines += [f"reveal_type(s.{setting.name})" for setting in SETTINGS]
    lines += ["wrong: str = s.PORT", "s.MEMORY_ENABLE"]
    probe.write_text("\n".join(lines) + "\n", encoding="utf-8")
    _code, report = run_mypy(str(probe))
    found = [line.split(":", 2)[2].strip() for line in report.splitlines()
             if line.startswith(str(probe))]
    expected = [f'note: Revealed type is "{REVEALED[s.kind]}"' for s in SETTINGS]
    assert found[:len(SETTINGS)] == expected
    assert [f.split("  [")[-1] for f in found[len(SETTINGS):]] == ["assignment]",
                                                                     "attr-defined]"]


def test_attribute_and_mapping_read_the_same_value() -> None:
    settings = Settings.from_env({"PORT": "8123"}, MEMORY_ENABLED=False)
    assert settings.PORT == settings["PORT"] == 8123
    assert settings.MEMORY_ENABLED is False and settings["MEMORY_ENABLED"] is False
    changed = settings.with_values({"PORT": 9000})
    assert changed.PORT == 9000 and settings.PORT == 8123


def test_a_snapshot_cannot_be_changed_in_place() -> None:
    settings = Settings.from_env({})
    with pytest.raises(AttributeError):
        settings.PORT = 1  # type: ignore[misc]
