"""The data folder does not follow the folder the program is started from: a relative
PAWWAKE_DATA_DIR (the default ``data`` too) is taken from the program's folder, and a database
left in the starting folder by an earlier version is pointed out loudly at start."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from pawwake.data_folder import announce_data_folder, earlier_database
from pawwake.settings import PROGRAM_DIR, Settings


def test_the_default_data_folder_is_next_to_the_program_wherever_it_starts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert (PROGRAM_DIR / "pawwake.py").is_file()
    for folder in (tmp_path, PROGRAM_DIR / "pawwake"):
        monkeypatch.chdir(folder)
        assert Settings.from_env({}).PAWWAKE_DATA_DIR == str(PROGRAM_DIR / "data")
    assert Settings.from_env({"PAWWAKE_DATA_DIR": "state/pawwake"}).PAWWAKE_DATA_DIR == str(
        PROGRAM_DIR / "state" / "pawwake")
    assert Settings.from_env({"PAWWAKE_DATA_DIR": str(tmp_path)}).PAWWAKE_DATA_DIR == str(
        tmp_path)
    assert Settings.from_env({"PAWWAKE_DATA_DIR": "~/pawwake-data"}).PAWWAKE_DATA_DIR == str(
        Path.home() / "pawwake-data")
    # a snapshot made from a snapshot keeps the same folder
    settings = Settings.from_env({})
    assert settings.with_values({"PORT": 9}).PAWWAKE_DATA_DIR == settings.PAWWAKE_DATA_DIR


def test_a_database_left_in_the_starting_folder_is_pointed_out(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    program_data = tmp_path / "program" / "data"
    started_in = tmp_path / "home"
    (started_in / "data" / "postgres").mkdir(parents=True)
    settings = Settings.from_env({}, PAWWAKE_DATA_DIR=str(program_data))

    with caplog.at_level(logging.INFO, logger="pawwake.data_folder"):
        announce_data_folder(settings, {}, started_in)
    assert f"data folder: {program_data} (embedded PostgreSQL" in caplog.text
    [warning] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert str(started_in / "data") in warning.getMessage()
    assert f"PAWWAKE_DATA_DIR={started_in / 'data'}" in warning.getMessage()

    # chosen on purpose, already in use, or an external database: nothing to point out
    assert earlier_database(settings, {"PAWWAKE_DATA_DIR": str(program_data)},
                            started_in) is None
    assert earlier_database(settings.with_values({"DATABASE_URL": "postgresql://x/y"}), {},
                            started_in) is None
    (program_data / "postgres").mkdir(parents=True)
    assert earlier_database(settings, {}, started_in) is None
    assert earlier_database(settings, {}, tmp_path / "elsewhere") is None
