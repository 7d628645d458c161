"""Settings are read as typed attributes: the attribute list must stay equal to the table."""

from __future__ import annotations

import typing

import pytest

from pawwake.settings import SETTINGS, Settings

PYTHON_TYPES = {"str": str, "url": str, "optional_url": str, "int": int, "float": float,
                "bool": bool, "choice": str, "optional_float": float | None}


def test_every_setting_has_a_typed_attribute_and_no_more() -> None:
    hints = typing.get_type_hints(Settings)
    assert set(hints) == {s.name for s in SETTINGS}
    for setting in SETTINGS:
        assert hints[setting.name] == PYTHON_TYPES[setting.kind], setting.name


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
