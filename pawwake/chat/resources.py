"""The chat flow's own shared state and its face.

``ChatResources`` (``services.chat``): the persona file, the steps each protocol's requests
run, the clock the steps read, and the sessions whose finished turn is still being stored (read
your writes, this process). ``ChatFlow``: what preparing a request and finishing it take, built
by the assembly (``services.py``) and handed to the pipeline by the turn that relays it;
``RelayParts``: what that turn works with.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pawwake.chat.persona import PersonaFile
from pawwake.chat.prepared import OnSuccess, PreparedChat, Steps
from pawwake.conversations.pending import Pending

if TYPE_CHECKING:
    from pawwake.database import Database
    from pawwake.live_settings import RuntimeConfig
    from pawwake.llm.http import HttpClient
    from pawwake.llm.sse import CapturedReply
    from pawwake.llm.upstream_health import UpstreamHealth
    from pawwake.replies_in_flight import RepliesInFlight
    from pawwake.tasks import BackgroundTasks



def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(eq=False)
class ChatResources:
    """Per-app chat state: the persona file, the steps each protocol's requests run (built by
    the assembly from ``chat_steps``, ``messages_steps``, ``responses_steps``), the clock the
    steps read, and the sessions whose turn is being stored."""

    steps: Steps = ()  # chat's (``chat_steps``); a test may add one
    messages_steps: Steps = ()  # Messages' (``protocols/anthropic/pipeline.py``)
    responses_steps: Steps = ()  # Responses' (``protocols/responses/prepare.py``)
    persona: PersonaFile = field(default_factory=PersonaFile)
    clock: Callable[[], datetime] = utc_now
    # Sessions whose finished turn is being stored, so this process's next request of the
    # session waits for it (set when the store ends either way; conversations/pending.py).
    pending: Pending = field(default_factory=dict)


@dataclass(frozen=True)
class ChatFlow:
    """What the pipeline works with: the database as configured (None: pure forwarding), the
    background tasks the after-reply hooks run on, the chat resources, and the turn store's
    two ways in (the success hook that stores a turn; an incomplete turn kept)."""

    database: Database | None
    tasks: BackgroundTasks
    chat: ChatResources
    turn_writer: Callable[[PreparedChat], OnSuccess]
    store_incomplete: Callable[[PreparedChat, CapturedReply], Coroutine[Any, Any, None]]


@dataclass(frozen=True)
class RelayParts:
    """What a turn relaying a reply works with (``ChatTurn`` and the other protocols'): the
    pipeline, the HTTP client, the provider's health, the settings in force, and the replies
    in flight (a graceful shutdown ends them)."""

    flow: ChatFlow
    http: HttpClient
    upstream_health: UpstreamHealth
    config: RuntimeConfig
    in_flight: RepliesInFlight
