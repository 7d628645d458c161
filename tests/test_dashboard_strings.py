"""The dashboard's string catalogs: both languages hold the same keys, and every key that the
templates or the dashboard's code ask for exists.

Keys are found three ways, matching how they are written: a literal first argument of the
translation call (``t("a.b")`` in templates, ``translate(lang, "a.b")`` / ``t("a.b")`` in
Python), any other quoted literal in a known namespace (keys kept in tables and passed around
before being translated), and a literal prefix that is completed at run time
(``t("layer." ~ n)``, ``f"refusal.{code}"``), which must begin at least one key."""

from __future__ import annotations

import ast
import json
import re
import string
from collections.abc import Iterator
from pathlib import Path

import pytest

from pawwake.dashboard.i18n import LANGUAGES, STRINGS, STRINGS_DIR

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = ROOT / "templates"
DASHBOARD = ROOT / "pawwake" / "dashboard"

KEY = re.compile(r"[a-z][a-z0-9_]*\.[a-z0-9_]+")
PREFIX = re.compile(r"[a-z][a-z0-9_]*\.[a-z0-9_]*")
FILE_SUFFIXES = (".html", ".json", ".css", ".js", ".svg", ".png", ".ico", ".txt", ".py")
# Template forms: t("key" ...), a quoted literal anywhere, and "prefix." ~ value.
TEMPLATE_CALL = re.compile(r"\bt\(\s*([\"'])(?P<key>[^\"']*)\1\s*(?P<join>~)?")
TEMPLATE_LITERAL = re.compile(r"([\"'])(?P<text>[a-z][a-z0-9_]*\.[a-z0-9_]*)\1\s*(?P<join>~)?")


def namespaces() -> set[str]:
    return {key.split(".", 1)[0] for key in STRINGS["zh"]}


def looks_like_key(text: str) -> bool:
    return (KEY.fullmatch(text) is not None and text.split(".", 1)[0] in namespaces()
            and not text.endswith(FILE_SUFFIXES))


def template_uses() -> Iterator[tuple[str, str, bool]]:
    """(where, key or prefix, is_prefix) for every key a template names."""
    for path in sorted(TEMPLATES.rglob("*.html")):
        text = path.read_text(encoding="utf-8")
        where = str(path.relative_to(ROOT))
        for match in TEMPLATE_CALL.finditer(text):
            yield where, match["key"], bool(match["join"])
        for match in TEMPLATE_LITERAL.finditer(text):
            literal = match["text"]
            if match["join"] and PREFIX.fullmatch(literal) and literal.split(".")[0] in namespaces():
                yield where, literal, True
            elif looks_like_key(literal):
                yield where, literal, False


def _call_key(node: ast.Call) -> ast.expr | None:
    """The key argument of ``translate(lang, key, ...)`` or ``t(key, ...)``."""
    name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
    index = {"translate": 1, "t": 0}.get(name)
    if index is None or len(node.args) <= index:
        return None
    return node.args[index]


def code_uses() -> Iterator[tuple[str, str, bool]]:
    """(where, key or prefix, is_prefix) for every key the dashboard's Python code names."""
    for path in sorted(DASHBOARD.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        in_fstrings = {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr)
                       for part in node.values}
        for node in ast.walk(tree):
            where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Call):
                key = _call_key(node)
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    yield where, key.value, False
            elif isinstance(node, ast.JoinedStr):
                head = node.values[0] if node.values else None
                if (isinstance(head, ast.Constant) and isinstance(head.value, str)
                        and PREFIX.fullmatch(head.value)
                        and head.value.split(".")[0] in namespaces()):
                    yield where, head.value, True
            elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
                    and id(node) not in in_fstrings and looks_like_key(node.value)):
                yield where, node.value, False


def missing(uses: Iterator[tuple[str, str, bool]]) -> list[str]:
    known = STRINGS["zh"]
    return [f"{where}: {key}{'…' if is_prefix else ''}" for where, key, is_prefix in uses
            if (not any(k.startswith(key) for k in known) if is_prefix else key not in known)]


def placeholders(text: str) -> set[str]:
    return {field for _, field, _, _ in string.Formatter().parse(text) if field is not None}


def test_each_language_has_one_data_file_read_once() -> None:
    assert sorted(p.stem for p in STRINGS_DIR.glob("*.json")) == sorted(LANGUAGES)
    for lang in LANGUAGES:
        on_disk = json.loads((STRINGS_DIR / f"{lang}.json").read_text(encoding="utf-8"))
        assert STRINGS[lang] == on_disk


def test_both_languages_hold_the_same_keys_and_placeholders() -> None:
    zh, en = STRINGS["zh"], STRINGS["en"]
    assert sorted(set(zh) - set(en)) == []
    assert sorted(set(en) - set(zh)) == []
    for key in zh:
        assert zh[key].strip() and en[key].strip(), key
        assert placeholders(zh[key]) == placeholders(en[key]), key


def test_every_key_the_templates_use_exists() -> None:
    uses = list(template_uses())
    assert len(uses) > 300  # the scan still finds the templates' keys
    assert missing(iter(uses)) == []


def test_every_key_the_dashboard_code_uses_exists() -> None:
    uses = list(code_uses())
    assert any(is_prefix for _, _, is_prefix in uses)
    assert len(uses) > 100
    assert missing(iter(uses)) == []


@pytest.mark.parametrize(("source", "found"), [
    ('{{ t("nav.status") }}', ("nav.status", False)),
    ("{{ t( 'nav.status', n=1) }}", ("nav.status", False)),
    ('{{ t("layer." ~ n) }}', ("layer.", True)),
    ('{% set k = "db." ~ mode %}', ("db.", True)),
    ('{{ field(label="status.version") }}', ("status.version", False)),
])
def test_the_template_scan_reads_every_form_in_use(source: str, found: tuple[str, bool],
                                                  tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                  ) -> None:
    (tmp_path / "x.html").write_text(source, encoding="utf-8")
    monkeypatch.setattr(f"{__name__}.TEMPLATES", tmp_path)
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    assert found in {(key, is_prefix) for _, key, is_prefix in template_uses()}


def test_a_key_that_does_not_exist_is_reported() -> None:
    uses = iter([("x.html", "nav.no_such_page", False), ("y.py:1", "nope_ns.", True)])
    assert missing(uses) == ["x.html: nav.no_such_page", "y.py:1: nope_ns.…"]
