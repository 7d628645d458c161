"""The README, the deployment files and CI agree with the code and with each other."""

from __future__ import annotations

import functools
import hashlib
import os
import re
from pathlib import Path
from typing import Any

import pytest

from pawwake.settings import BY_NAME, GROUPS, SETTINGS
from pawwake.settings.entry import Setting
from pawwake.settings.values import parse_value

ROOT = Path(__file__).resolve().parent.parent

RUN_COMMAND = "pip install -r requirements.txt && python pawwake.py"
TEST_COMMAND = "pip install -r requirements-dev.txt && python -m pytest"
APT_COMMAND = "apt-get install -y chromium fonts-wqy-microhei pgbouncer haproxy"
# Debian's npm conflicts with a Node.js that ships its own (NodeSource's): only when missing.
NPM_COMMAND = "command -v npm >/dev/null || apt-get install -y nodejs npm"
SECRET_COMMAND = "python3 -c 'import secrets; print(secrets.token_urlsafe(48))'"

# How each part of the README says whether a setting applies at once or after a restart.
APPLIES = {
    "zh": {"热更新": True, "需重启": False},
    "en": {"hot": True, "restart": False},
}
TABLE_HEADERS = {"zh": "设置", "en": "Setting"}
NAME_CELL = re.compile(r"`([A-Z][A-Z0-9_]*)`")
AGPL3_SHA256 = "0d96a4ff68ad6d4b6f1f30f713b18d5184912ba8dd389f86aa7710db079abcb0"


def read(name: str) -> str:
    return (ROOT / name).read_text(encoding="utf-8")


@functools.cache
def readme_parts() -> dict[str, str]:
    """The README's Chinese part (first) and English part (second), split at their headings."""
    text = read("README.md")
    zh_start = text.index("\n## 中文\n")
    en_start = text.index("\n## English\n")
    assert zh_start < en_start, "the Chinese part comes first"
    return {"zh": text[zh_start:en_start], "en": text[en_start:]}


def settings_tables(part: str, header: str) -> list[list[list[str]]]:
    """Every Markdown table in ``part`` whose first header cell is ``header``, as rows of cells."""
    tables: list[list[list[str]]] = []
    current: list[list[str]] | None = None
    in_table = False
    for line in part.splitlines():
        if not line.startswith("|"):
            current, in_table = None, False
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if not in_table:
            in_table = True
            if cells[0] == header:
                current = []
                tables.append(current)
            continue
        if current is None or set("".join(cells)) <= set("-: "):
            continue
        current.append(cells)
    return tables


@functools.cache
def documented_rows(lang: str) -> dict[str, list[str]]:
    """Setting name -> its table row, for one part of the README."""
    rows: dict[str, list[str]] = {}
    for table in settings_tables(readme_parts()[lang], TABLE_HEADERS[lang]):
        for cells in table:
            assert len(cells) == 4, f"a settings row needs 4 cells: {cells}"
            match = NAME_CELL.fullmatch(cells[0])
            assert match, f"first cell is not a backticked setting name: {cells[0]!r}"
            assert match.group(1) not in rows, f"{match.group(1)} is documented twice ({lang})"
            rows[match.group(1)] = cells
    return rows


def shown_default(setting: Setting) -> str:
    """A default as the README and .env.example write it ("" for none)."""
    value = setting.default
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def test_readme_has_a_chinese_then_an_english_part() -> None:
    parts = readme_parts()
    assert re.search(r"[\u4e00-\u9fff]{20}", parts["zh"])
    assert "What Pawwake is" in parts["en"]


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_readme_gives_the_commands_verbatim(lang: str) -> None:
    part = readme_parts()[lang]
    for command in (RUN_COMMAND, TEST_COMMAND, APT_COMMAND, NPM_COMMAND, SECRET_COMMAND):
        assert command in part, f"{command!r} missing from the {lang} part"
    assert "http://127.0.0.1:8000/v1" in part


@pytest.mark.parametrize("lang", ["zh", "en"])
@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: s.name)
def test_readme_documents_setting(setting: Setting, lang: str) -> None:
    rows = documented_rows(lang)
    assert setting.name in rows, f"{setting.name} is missing from the {lang} settings tables"
    _name, meaning, default, applies = rows[setting.name]
    assert meaning, f"{setting.name} has no meaning in the {lang} part"
    shown = shown_default(setting)
    if shown:
        assert default == f"`{shown}`", f"{setting.name}: README default {default!r}"
    else:
        assert "`" not in default, f"{setting.name} has no default, README says {default!r}"
    assert APPLIES[lang].get(applies) is setting.hot, f"{setting.name}: {applies!r}"


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_readme_has_one_settings_table_per_group_in_order(lang: str) -> None:
    groups = []
    for table in settings_tables(readme_parts()[lang], TABLE_HEADERS[lang]):
        names = [NAME_CELL.fullmatch(cells[0]).group(1) for cells in table]  # type: ignore[union-attr]
        table_groups = {BY_NAME[name].group for name in names if name in BY_NAME}
        assert len(table_groups) == 1, f"one table mixes groups {table_groups}: {names}"
        groups.append(table_groups.pop())
    assert groups == list(GROUPS)


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_readme_settings_tables_name_only_real_settings(lang: str) -> None:
    for table in settings_tables(readme_parts()[lang], TABLE_HEADERS[lang]):
        for cells in table:
            for cell in cells[:2]:  # the name and the meaning; defaults are values, not names
                for name in re.findall(r"`([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*)`", cell):
                    assert name in BY_NAME, f"README names {name}, which is not a setting"


def test_ci_runs_the_readme_test_command() -> None:
    path = ROOT / ".ci" / "run"
    assert os.access(path, os.X_OK), ".ci/run must be executable"
    script = path.read_text(encoding="utf-8")
    assert script.startswith("#!/usr/bin/env bash\n")
    assert "set -euo pipefail" in script
    code = [line.strip() for line in script.splitlines() if not line.lstrip().startswith("#")]
    install, pytest_part = (piece.strip() for piece in TEST_COMMAND.split("&&"))
    assert any(install in line for line in code), "CI does not install requirements-dev.txt"
    assert any(line.startswith(pytest_part) for line in code), "CI does not run pytest"
    # like the README, CI asks for Debian's nodejs and npm only where npm is missing
    node = [line for line in code if "nodejs npm" in line]
    assert node and all("command -v npm" in line for line in node), node


def test_render_blueprint() -> None:
    blueprint = parse_yaml_subset(read("render.yaml"))
    (web,) = [s for s in blueprint["services"] if s["type"] == "web"]
    assert (web["runtime"], web["plan"], web["healthCheckPath"]) == ("docker", "free", "/")
    assert (ROOT / web.get("dockerfilePath", "./Dockerfile")).is_file()
    databases = {db["name"]: db for db in blueprint["databases"]}
    env = {item["key"]: item for item in web["envVars"]}

    source = env["DATABASE_URL"]["fromDatabase"]
    assert source["property"] == "connectionString"
    assert databases[source["name"]]["plan"] == "free"
    for key in ("GATEWAY_SECRET", "SESSION_SECRET"):
        assert env[key] == {"key": key, "generateValue": True}
    for key in ("API_KEY", "DASHBOARD_PASSWORD"):
        assert env[key] == {"key": key, "sync": False}
    for key, item in env.items():
        assert key in BY_NAME, f"render.yaml sets {key}, which is not a setting"
        if "value" in item:
            parse_value(BY_NAME[key], str(item["value"]))


def test_yaml_subset_parser_agrees_with_pyyaml() -> None:
    yaml = pytest.importorskip("yaml")
    text = read("render.yaml")
    assert parse_yaml_subset(text) == yaml.safe_load(text)


def test_dockerfile_runs_the_gateway_as_an_unprivileged_user() -> None:
    instructions = dockerfile_instructions(read("Dockerfile"))
    verbs = [verb for verb, _ in instructions]
    assert instructions[0] == ("FROM", "python:3.11-slim")
    users = [i for i, (verb, _) in enumerate(instructions) if verb == "USER"]
    assert users, "the Dockerfile never leaves root"
    user = instructions[users[-1]][1].split(":")[0]
    assert user not in ("root", "0")
    assert users[-1] < verbs.index("CMD")
    assert ("RUN", "pip install --no-cache-dir -r requirements.txt") in instructions
    env = " ".join(args for verb, args in instructions if verb == "ENV")
    assert "PAWWAKE_DATA_DIR=/data" in env.split()
    assert any(verb == "RUN" and re.search(r"chown \S+ /data", args)
               for verb, args in instructions), "/data must belong to the app user"
    assert ("EXPOSE", "8000") in instructions
    assert "pawwake.py" in instructions[verbs.index("CMD")][1]


def test_dockerignore_keeps_local_state_and_secrets_out() -> None:
    patterns = {line.strip() for line in read(".dockerignore").splitlines()}
    assert {"data/", ".git", ".env"} <= patterns


def test_env_example_lists_every_setting_with_its_default() -> None:
    found: dict[str, tuple[bool, str]] = {}
    for line in read(".env.example").splitlines():
        match = re.fullmatch(r"(# )?([A-Z][A-Z0-9_]*)=(.*)", line)
        if match:
            name = match.group(2)
            assert name in BY_NAME, f".env.example names {name}, which is not a setting"
            assert name not in found, f"{name} appears twice"
            found[name] = (match.group(1) is None, match.group(3))
    assert set(found) == set(BY_NAME)
    for name, (active, value) in found.items():
        setting = BY_NAME[name]
        if setting.secret:
            assert (active, value) == (True, ""), f"{name} must be an empty, active line"
        else:
            assert not active, f"{name} should be commented out (it shows a default)"
            assert value == shown_default(setting), f"{name}: {value!r}"


def test_license_is_the_verbatim_agpl3() -> None:
    text = (ROOT / "LICENSE").read_bytes()
    assert text.lstrip().startswith(b"GNU AFFERO GENERAL PUBLIC LICENSE")
    assert hashlib.sha256(text).hexdigest() == AGPL3_SHA256
    assert 'license = "AGPL-3.0-only"' in read("pyproject.toml")


# -- helpers: a Dockerfile reader and a parser for the block-style YAML that render.yaml uses --


def dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    """(VERB, arguments) for each instruction, continuation lines joined, comments dropped."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1].strip() + " "
            continue
        verb, _, args = (pending + stripped).partition(" ")
        instructions.append((verb.upper(), " ".join(args.split())))
        pending = ""
    assert not pending, "the Dockerfile ends inside a continued line"
    return instructions


def parse_yaml_subset(text: str) -> Any:
    """Parse block mappings, block lists, plain/quoted scalars, ``[]`` and comments.

    PyYAML is not a dependency; anything outside this subset raises ValueError.
    """
    lines: list[tuple[int, str, int]] = []
    for number, raw in enumerate(text.splitlines(), 1):
        if "\t" in raw:
            raise ValueError(f"line {number}: tab in indentation")
        content = _strip_comment(raw).rstrip()
        if content.strip():
            lines.append((len(content) - len(content.lstrip(" ")), content.strip(), number))
    if not lines:
        raise ValueError("empty document")
    value, pos = _parse_block(lines, 0, lines[0][0])
    if pos != len(lines):
        raise ValueError(f"line {lines[pos][2]}: unexpected indentation")
    return value


_KEY = re.compile(r"([A-Za-z_][\w.-]*):(?: (.*))?")


def _strip_comment(line: str) -> str:
    quote = None
    for i, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1] == " "):
            return line[:i]
    return line


def _parse_block(lines: list[tuple[int, str, int]], pos: int, indent: int) -> tuple[Any, int]:
    if lines[pos][1].startswith("- ") or lines[pos][1] == "-":
        return _parse_list(lines, pos, indent)
    return _parse_map(lines, pos, indent)


def _parse_map(lines: list[tuple[int, str, int]], pos: int, indent: int) -> tuple[Any, int]:
    result: dict[str, Any] = {}
    while pos < len(lines) and lines[pos][0] == indent and not lines[pos][1].startswith("-"):
        _, content, number = lines[pos]
        match = _KEY.fullmatch(content)
        if not match:
            raise ValueError(f"line {number}: expected 'key: value', got {content!r}")
        key, rest = match.group(1), (match.group(2) or "").strip()
        if key in result:
            raise ValueError(f"line {number}: duplicate key {key!r}")
        pos += 1
        if rest:
            result[key] = _parse_scalar(rest, number)
        elif pos < len(lines) and lines[pos][0] > indent:
            result[key], pos = _parse_block(lines, pos, lines[pos][0])
        elif pos < len(lines) and lines[pos][0] == indent and lines[pos][1].startswith("- "):
            result[key], pos = _parse_list(lines, pos, indent)
        else:
            result[key] = None
    if pos < len(lines) and lines[pos][0] > indent:
        raise ValueError(f"line {lines[pos][2]}: unexpected indentation")
    return result, pos


def _parse_list(lines: list[tuple[int, str, int]], pos: int, indent: int) -> tuple[Any, int]:
    items: list[Any] = []
    while pos < len(lines) and lines[pos][0] == indent and lines[pos][1].startswith("- "):
        _, content, number = lines[pos]
        item = content[2:].lstrip(" ")
        if _KEY.fullmatch(item):
            item_indent = indent + len(content) - len(item)
            lines = [*lines[:pos], (item_indent, item, number), *lines[pos + 1:]]
            value, pos = _parse_map(lines, pos, item_indent)
        else:
            value, pos = _parse_scalar(item, number), pos + 1
        items.append(value)
    return items, pos


def _parse_scalar(text: str, number: int) -> Any:
    if text == "[]":
        return []
    if text[0] in "'\"":
        if len(text) < 2 or text[-1] != text[0]:
            raise ValueError(f"line {number}: unterminated quote")
        return text[1:-1]
    if text[0] in "[{&*!|>%@`":
        raise ValueError(f"line {number}: unsupported YAML {text!r}")
    if text in ("true", "false"):
        return text == "true"
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    return text
