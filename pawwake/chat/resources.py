"""The chat flow's own shared state, one typed field of ``Services`` (``services.chat``).

Kept apart from ``services.py`` so the chat modules can name it without importing the
assembly: the persona file, the steps a chat request runs, the clock the steps read, and the
sessions whose finished turn is still being stored (read your writes, this process).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from pawwake.chat.persona import PersonaFile
from pawwake.chat.prepared import ChatStep
from pawwake.conversations.pending import Pending


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(eq=False)
class ChatResources:
    """Per-app chat state: the persona file, the steps chat requests run (``CHAT_STEPS`` of
    ``chat/pipeline.py``; a test may add one), the clock steps read, and the sessions whose
    turn is being stored."""

    steps: tuple[ChatStep, ...]
    persona: PersonaFile = field(default_factory=PersonaFile)
    clock: Callable[[], datetime] = utc_now
    # Sessions whose finished turn is being stored, so this process's next request of the
    # session waits for it (set when the store ends either way; conversations/pending.py).
    pending: Pending = field(default_factory=dict)
