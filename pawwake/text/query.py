"""The text a search query is embedded as: a long message is condensed first.

Embedding time grows with length and all of it comes before the reply's first token. With the
local model a 10-character query takes about 15 ms, 100 characters about 75 ms, 1,000 about
1.5 s, and a pasted document several seconds. A message longer than ``EMBED_MAX_CHARS`` is
embedded as its keywords (what the whole message is about, from the TF-IDF keywords) followed by
its last ``TAIL_CHARS`` characters (usually what it asks). Short messages are embedded as sent.
"""

from __future__ import annotations

from collections.abc import Sequence

EMBED_MAX_CHARS = 96
TAIL_CHARS = 48


def embedding_text(text: str, keywords: Sequence[str]) -> str:
    """``text`` itself when short, else its keywords plus its tail, within EMBED_MAX_CHARS."""
    if len(text) <= EMBED_MAX_CHARS:
        return text
    tail = " ".join(text[-TAIL_CHARS:].split())
    room = EMBED_MAX_CHARS - len(tail) - 1
    picked: list[str] = []
    for keyword in keywords:
        if keyword in tail or len(keyword) + 1 > room:
            continue
        picked.append(keyword)
        room -= len(keyword) + 1
    return " ".join([*picked, tail])
