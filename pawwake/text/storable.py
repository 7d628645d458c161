"""Text PostgreSQL can store: no NUL, no lone surrogates.

PostgreSQL refuses NUL in ``text`` and the ``\\u0000`` escape in ``jsonb``; a lone surrogate
(``\\ud800`` in JSON) cannot be encoded as UTF-8 at all. Both arrive easily (a pasted binary
file, a truncated emoji, a model's reply), and each used to fail a write after the client had
its answer. Every writer cleans through these functions: NUL is removed, a lone surrogate
becomes U+FFFD. Pure functions, no imports of ours, so every layer may use them.
"""

from __future__ import annotations

import json
import re
from typing import Any

REPLACEMENT = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")
# A ``\u0000`` escape in JSON text: the backslash must not itself be escaped (``\\u0000`` is a
# backslash followed by the letters u0000, which is fine).
_NUL_ESCAPE = re.compile(r"(?<!\\)((?:\\\\)*)\\u0000")


def is_storable(text: str) -> bool:
    if "\x00" in text:
        return False
    if text.isascii():
        return True
    return _SURROGATE.search(text) is None


def storable_text(text: str) -> str:
    """``text`` without NUL and with every lone surrogate replaced by U+FFFD.

    A Python string never holds a valid surrogate pair (JSON's ``\\ud83d\\ude00`` is decoded
    to one code point), so any surrogate code point in it is a lone one.
    """
    if "\x00" in text:
        text = text.replace("\x00", "")
    if not text.isascii() and _SURROGATE.search(text) is not None:
        text = _SURROGATE.sub(REPLACEMENT, text)
    return text


def storable_value(value: Any) -> Any:
    """A parsed JSON value with every string, keys included, made storable.

    Lists and dicts are cleaned IN PLACE (a dict whose keys change is replaced by a new one):
    meant for a body just parsed from a request, which nothing else holds yet. Iterative, so
    any depth the JSON parser accepted is fine."""
    if isinstance(value, str):
        return storable_text(value)
    if not isinstance(value, (dict, list)):
        return value
    root = [value]
    stack: list[tuple[Any, Any, Any]] = [(root, 0, value)]
    while stack:
        parent, slot, item = stack.pop()
        if isinstance(item, dict):
            if any(not is_storable(k) for k in item):
                item = {storable_text(k): v for k, v in item.items()}
                parent[slot] = item
            for key, child in item.items():
                if isinstance(child, str):
                    if not is_storable(child):
                        item[key] = storable_text(child)
                elif isinstance(child, (dict, list)):
                    stack.append((item, key, child))
        elif isinstance(item, list):
            for index, child in enumerate(item):
                if isinstance(child, str):
                    if not is_storable(child):
                        item[index] = storable_text(child)
                elif isinstance(child, (dict, list)):
                    stack.append((item, index, child))
    return root[0]


def storable_json(value: Any, **dumps_options: Any) -> str:
    """``value`` as JSON text that a ``jsonb`` column accepts.

    Cleans the serialised text rather than the value, so the value is never copied and any
    depth ``json.dumps`` handles is fine: NUL only ever appears as a ``\\u0000`` escape, and
    with ``ensure_ascii=False`` a lone surrogate appears as itself.
    """
    text = json.dumps(value, ensure_ascii=False, **dumps_options)
    if "\\u0000" in text:
        text = _NUL_ESCAPE.sub(r"\1", text)
    if not text.isascii() and _SURROGATE.search(text) is not None:
        text = _SURROGATE.sub(REPLACEMENT, text)
    return text
