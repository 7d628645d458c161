"""Which of the two languages a text is written in, for language-aware semantic scores."""

from __future__ import annotations

import re
from functools import lru_cache

_HAN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
LANGUAGES = ("zh", "en")


@lru_cache(maxsize=8192)
def language_of(text: str) -> str:
    """"zh" when at least a quarter of the non-space characters are Chinese (a Chinese
    sentence with an English name or brand stays Chinese), else "en". Remembered per text:
    a search asks it of each of its few hundred candidates, mostly the same memories again."""
    dense = "".join(text.split())
    if not dense:
        return "en"
    return "zh" if 4 * len(_HAN.findall(dense)) >= len(dense) else "en"
