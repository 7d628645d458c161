"""Request bodies parsed as JSON: a bounded nesting depth, and text made storable on the way in.

Every route that reads JSON passes here, so a 100,000-deep ``[[[[...`` is a 400 instead of a
RecursionError, and NUL or a lone surrogate never reaches validation, hashing, embeddings or
the upstream re-encoding (``storable_text``: the same rule the database layer applies).
"""

from __future__ import annotations

import json
import re
from typing import Any

from pawwake.text.storable import storable_value

# Deeper than any real body (chat messages with tool schemas nest about 10-15 levels).
MAX_JSON_DEPTH = 100

# Any escape that could be a NUL or a surrogate: cheap enough to run on every chat body.
_CANDIDATE = re.compile(rb"\\u[dD0]")
# A ``\u0000`` escape, a high surrogate escape not followed by a low one, or a low one not
# preceded by a high one: decided inside the regex engine, so the usual emoji pairs
# (``\ud83d\ude00``) are no reason to walk the body.
_UNSTORABLE_ESCAPE = re.compile(
    rb"\\u(?=[dD0])(?:0000"
    rb"|[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F])"
    rb"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2}\\u)[dD][c-fC-F])")
# A surrogate written as raw (CESU-8) bytes, which json.loads(bytes) lets through.
_RAW_SURROGATE = re.compile(rb"\xed[\xa0-\xbf]")


class JsonTooDeep(ValueError):
    """The body nests arrays/objects deeper than the limit."""

    def __init__(self, limit: int | None = None) -> None:
        detail = f"more than {limit} levels" if limit is not None else "too deeply"
        super().__init__(f"The JSON body is nested {detail}.")


def parse_json(raw: bytes | str, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Parse a request body. Raises JsonTooDeep past ``max_depth`` levels, ValueError (or
    UnicodeDecodeError) for anything that is not JSON; every string comes back storable."""
    try:
        value = json.loads(raw)
    except RecursionError:
        raise JsonTooDeep(max_depth) from None
    if depth_exceeds(value, max_depth):
        raise JsonTooDeep(max_depth)
    return storable_value(value)


def parse_chat_json(raw: bytes) -> Any:
    """The chat path's parse, as cheap as a bare ``json.loads`` for ordinary bodies: the
    depth is bounded by the parser's own recursion limit (about 1,000 levels), and strings
    are walked only when the raw bytes hint at a NUL or a lone surrogate."""
    try:
        value = json.loads(raw)
    except RecursionError:
        raise JsonTooDeep() from None
    if may_hold_unstorable(raw):
        value = storable_value(value)
    return value


def depth_exceeds(value: Any, limit: int) -> bool:
    """True when arrays/objects nest more than ``limit`` levels (``[]`` is one level)."""
    if not isinstance(value, (dict, list)):
        return False
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children
                     if isinstance(child, (dict, list)))
    return False


def may_hold_unstorable(raw: bytes) -> bool:
    """Whether JSON bytes may decode to a NUL or a lone surrogate (false positives allowed,
    e.g. an escaped backslash before ``u0000``; never a false negative)."""
    candidate = _CANDIDATE.search(raw)
    if candidate is not None and _UNSTORABLE_ESCAPE.search(raw, candidate.start()) is not None:
        return True
    return b"\xed" in raw and _RAW_SURROGATE.search(raw) is not None
