"""What of a conversation the memory model reads: the last rounds, bounded in size.

A chat may carry a pasted book (tens of megabytes in one message). The memory model needs
the gist, not the whole text, and every retry would send it again: each message is cut to
its beginning and end, and the dialogue keeps its most recent messages within a total.
"""

from __future__ import annotations

MAX_MESSAGE_CHARS = 8_000  # one message: its first 6,000 and last 2,000 characters
HEAD_CHARS = 6_000
MAX_DIALOGUE_CHARS = 32_000  # the whole dialogue shown to the memory model
OMITTED = "\n[… {n} characters left out …]\n"


def bounded_message(text: str) -> str:
    """``text``, or its beginning and end with a note of how much was left out."""
    if len(text) <= MAX_MESSAGE_CHARS:
        return text
    tail = MAX_MESSAGE_CHARS - HEAD_CHARS
    return text[:HEAD_CHARS] + OMITTED.format(n=f"{len(text) - MAX_MESSAGE_CHARS:,}") \
        + text[-tail:]


def bounded_dialogue(dialogue: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Every message bounded, then the most recent ones that fit in MAX_DIALOGUE_CHARS (at
    least the last one)."""
    kept: list[tuple[str, str]] = []
    total = 0
    for role, text in reversed(dialogue):
        short = bounded_message(text)
        if kept and total + len(short) > MAX_DIALOGUE_CHARS:
            break
        kept.append((role, short))
        total += len(short)
    kept.reverse()
    return kept
