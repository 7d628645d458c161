"""What the memory model writes to find a memory again: search keywords and the questions it
answers, in both Chinese and English.

Embeddings alone separate poorly across the two languages (from Chinese, the local model ranks
the right English memory in its top five for 0.05 of the dev set's questions), and a memory
rarely uses the words a later question will ("用户喜欢听爵士乐" / "what music do I like"). So
when the model extracts or scores a memory it also names its keywords ("爵士乐, 音乐, jazz,
music") and a few questions it answers ("我喜欢什么音乐？", "What music do I like?"); they are
cut into the row's index terms together with its content (``searchable_text``) and kept as
written, so a re-index cuts them again. An answer without them, or with anything else in
their place, leaves the memory findable by its content alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

MAX_KEYWORDS = 16
MAX_KEYWORD_CHARS = 40
MAX_QUESTIONS = 6
MAX_QUESTION_CHARS = 160


@dataclass(frozen=True)
class ModelTerms:
    keywords: list[str] = field(default_factory=list)
    questions: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, raw: Any) -> ModelTerms:
        """From a model's item (``{"keywords": [...], "questions": [...]}``): strings only,
        trimmed, de-duplicated and bounded; anything else is dropped."""
        if not isinstance(raw, dict):
            return cls()
        return cls(_strings(raw.get("keywords"), MAX_KEYWORDS, MAX_KEYWORD_CHARS),
                   _strings(raw.get("questions"), MAX_QUESTIONS, MAX_QUESTION_CHARS))


def _strings(value: Any, most: int, longest: int) -> list[str]:
    if not isinstance(value, list):
        return []
    kept: dict[str, None] = {}
    for item in value:
        if isinstance(item, str) and item.strip() and len(item.strip()) <= longest:
            kept.setdefault(" ".join(item.split()), None)
        if len(kept) >= most:
            break
    return list(kept)


def searchable_text(content: str, keywords: Sequence[str] = (),
                    questions: Sequence[str] = ()) -> str:
    """The text a memory's index terms are cut from: its content, then what the model wrote."""
    extra = [*keywords, *questions]
    return content if not extra else content + "\n" + "\n".join(extra)
