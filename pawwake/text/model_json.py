"""The JSON in a model's answer: models wrap it in code fences or a sentence of prose, so the
readers of our own model calls (extraction, consolidation) take it out the same way."""

from __future__ import annotations

import json
import re
from typing import Any

_FENCE = re.compile(r"^\s*```(?:json)?\s*|\s*```\s*$", re.IGNORECASE)


class AnswerNotJson(ValueError):
    """The answer holds no readable JSON value of the kinds asked for."""


def json_in_answer(text: str, openers: str = "{[") -> Any:
    """The answer parsed whole when it is JSON, else the value from the first of ``openers``
    to the last matching closer (prose around it ignored)."""
    body = _FENCE.sub("", text.strip())
    try:
        return json.loads(body, strict=False)
    except ValueError:
        pass
    starts = [i for i in (body.find(opener) for opener in openers) if i >= 0]
    if not starts:
        raise AnswerNotJson("no JSON in the answer")
    start = min(starts)
    end = body.rfind("}" if body[start] == "{" else "]")
    if end <= start:
        raise AnswerNotJson("unterminated JSON in the answer")
    try:
        return json.loads(body[start:end + 1], strict=False)
    except ValueError as exc:
        raise AnswerNotJson(f"malformed JSON: {exc}") from None
