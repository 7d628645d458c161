"""The storable-text rule and the JSON input parser, alone and against the real PostgreSQL."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pawwake.db.pool import create_pool, cursor, fetch_one
from pawwake.text.json_input import (
    MAX_JSON_DEPTH,
    JsonTooDeep,
    may_hold_unstorable,
    parse_chat_json,
    parse_json,
)
from pawwake.text.storable import storable_json, storable_text, storable_value


@pytest.mark.parametrize(("text", "clean"), [
    ("plain", "plain"), ("a\x00b\x00", "ab"), ("x\ud800y", "x\ufffdy"),
    ("\udc00😀\x00猫", "\ufffd😀猫"), ("", "")])
def test_storable_text(text: str, clean: str) -> None:
    assert storable_text(text) == clean


def test_storable_value_cleans_keys_and_nested_strings_at_any_depth() -> None:
    deep: Any = "x\x00"
    for _ in range(5000):
        deep = [deep]
    value = storable_value({"k\x00": ["\ud800", {"n": 1, "s": "a\x00"}], "deep": deep})
    assert value["k"] == ["\ufffd", {"n": 1, "s": "a"}]
    while isinstance(value["deep"], list):
        value["deep"] = value["deep"][0]
    assert value["deep"] == "x"


def test_storable_json_keeps_a_literal_backslash_u0000() -> None:
    text = storable_json({"nul": "a\x00b", "literal": "\\u0000", "pair": "\\\\u0000",
                          "lone": "\ud800"})
    assert json.loads(text) == {"nul": "ab", "literal": "\\u0000", "pair": "\\\\u0000",
                                "lone": "\ufffd"}


@pytest.mark.parametrize(("raw", "hint"), [
    (b'"\\ud83d\\ude00\\uD83D\\uDE00"', False), ("\"😀한국\"".encode(), False),
    (b'"plain \\n text"', False), (b'"\\ud83d"', True), (b'"\\ude00"', True),
    (b'"\\ud83d x \\ude00"', True), (b'"\\u0000"', True), (b'"\\ud83d\\ud83d\\ude00"', True),
    ('"\ud800"'.encode("utf-8", "surrogatepass"), True)])
def test_the_chat_hint_never_misses(raw: bytes, hint: bool) -> None:
    assert may_hold_unstorable(raw) is hint
    value = parse_chat_json(raw)
    assert value == storable_value(json.loads(raw))


def test_parse_json_limits_depth_and_cleans() -> None:
    assert parse_json(b"[" * (MAX_JSON_DEPTH - 1) + b"1" + b"]" * (MAX_JSON_DEPTH - 1))
    for depth in (MAX_JSON_DEPTH + 1, 100_000):
        with pytest.raises(JsonTooDeep):
            parse_json(b"[" * depth + b"]" * depth)
    with pytest.raises(JsonTooDeep):
        parse_chat_json(b"[" * 100_000)
    assert parse_json(b'{"a\\u0000": "\\ud800"}') == {"a": "\ufffd"}
    with pytest.raises(ValueError):
        parse_json(b"{")


async def test_every_text_parameter_reaches_postgresql_clean(database_url: str) -> None:
    pool = await create_pool(database_url, maxsize=1)
    try:
        async with cursor(pool) as cur:
            row = await fetch_one(cur, "SELECT %s AS t, %s::text[] AS a, %s::jsonb AS j",
                                  ("a\x00b\ud800", ["c\x00", "\udfff"],
                                   storable_json({"k\x00": "v\x00\ud800"})))
    finally:
        pool.close()
        await pool.wait_closed()
    assert row == {"t": "ab\ufffd", "a": ["c", "\ufffd"], "j": {"k": "v\ufffd"}}
