"""The chat flow's own shared state, one typed field of ``Services`` (``services.chat``).

Kept apart from ``services.py`` so the chat modules can name it without importing the
assembly: the persona file, the steps a chat request runs, the clock the steps read, and the
sessions whose finished turn is still being stored (read your writes, this process).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from pawwake.chat.persona import PersonaFile
from pawwake.chat.prepared import ChatStep

# Sessions whose finished turn is being stored, each with the event set when the store ended.
Pending = dict[str, asyncio.Event]


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(eq=False)
class ChatResources:
    """Per-app chat state: the persona file, the steps each protocol's requests run (built by
    the assembly from ``chat_steps``, ``messages_steps``, ``responses_steps``), the clock the
    steps read, and the sessions whose turn is being stored."""

    steps: tuple[ChatStep, ...] = ()  # chat's (``chat_steps``); a test may add one
    messages_steps: tuple[ChatStep, ...] = ()  # Messages' (``protocols/anthropic/pipeline.py``)
    responses_steps: tuple[ChatStep, ...] = ()  # Responses' (``protocols/responses/prepare.py``)
    persona: PersonaFile = field(default_factory=PersonaFile)
    clock: Callable[[], datetime] = utc_now
    # Sessions whose finished turn is being stored, so this process's next request of the
    # session waits for it (set when the store ends either way).
    pending: Pending = field(default_factory=dict)
