"""The text a search query is embedded as: a long message is condensed first.

Embedding time grows with length and all of it comes before the reply's first token. With the
local model a 10-character query takes about 15 ms, 100 characters about 75 ms, 1,000 about
1.5 s, and a pasted document several seconds. A message longer than ``EMBED_MAX_CHARS`` is
embedded as its keywords (what the whole message is about, from the TF-IDF keywords) followed by
its last ``TAIL_CHARS`` characters (usually what it asks). Short messages are embedded as sent.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

EMBED_MAX_CHARS = 96
TAIL_CHARS = 48


# Replies that carry nothing to search for: acknowledgements, fillers, laughter. Compared after
# dropping punctuation, symbols and emoji, lower-cased, with repeated characters squeezed.
FILLERS = frozenset({
    "嗯", "嗯呢", "哦", "噢", "喔", "啊", "呀", "哎", "唉", "诶", "欸", "嘛", "呢", "吧",
    "好", "好的", "好吧", "行", "可以", "对", "对的", "是", "是的", "没错", "收到", "知道了",
    "谢谢", "多谢", "继续", "然后呢", "ok", "okay", "k", "yes", "yep", "yeah", "yup", "no",
    "nope", "sure", "thanks", "thank you", "thx", "ty", "hmm", "hm", "mm", "uh", "um", "oh",
    "ah", "cool", "nice", "great", "go on", "continue", "right", "got it",
})
# What a coding client wraps around the user's words in the same message (Claude Code's
# environment, tool lists and reminders): hundreds of keywords that are not the question.
_CLIENT_BLOCKS = re.compile(r"<system-reminder>.*?(?:</system-reminder>|$)", re.DOTALL)
_LAUGHTER = re.compile(r"(?:ha|he|hi|ho|lo?l|xd|哈|嘿|呵|嘻|嗯|哼)+")
_REPEATS = re.compile(r"(.)\1+")


def nothing_to_search(text: str) -> bool:
    """True for a message with nothing to look up ("嗯", "ok", "哈哈哈", an emoji, punctuation):
    its vector would only pull in whatever sits nearest to small talk, for a model call."""
    kept = "".join(ch if unicodedata.category(ch)[0] in "LN" else " " for ch in text)
    core = " ".join(kept.lower().split())
    if not core:
        return True
    squeezed = _REPEATS.sub(r"\1", core)
    return (core in FILLERS or squeezed in FILLERS
            or _LAUGHTER.fullmatch(core.replace(" ", "")) is not None)


def needs_keywords(text: str) -> bool:
    """Whether ``embedding_text`` needs the text's keywords (else it is the text itself)."""
    return len(text) > EMBED_MAX_CHARS


def embedding_text(text: str, keywords: Sequence[str]) -> str:
    """``text`` itself when short, else its keywords plus its tail, within EMBED_MAX_CHARS."""
    if not needs_keywords(text):
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


def users_words(text: str) -> str:
    """The message without the blocks a client adds around the user's words
    (``<system-reminder>``), so a search looks for what the user asked."""
    if "<system-reminder>" not in text:
        return text
    return _CLIENT_BLOCKS.sub(" ", text).strip()
