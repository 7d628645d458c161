"""The partition-cache chat step: context comes from the database, not from the client.

Only the client's trailing user block (or tool results answering the thread's last stored tool
call) is taken; history, summary parts and zones come from the active thread. Rotation is
decided on a short read and saved with a compare-and-set, the summary model called with no
connection held (``thread_rotation``), so concurrent requests (in any process) rotate once. An unreachable database is a 503, never a reply built
from partial history. A request reads at most ``live_round_limit`` rounds; a thread with more
live rounds (stored before partition mode, or imported) catches up once.

A re-roll (the client asks again for the answer to the last stored round) does not repeat that
round: it becomes the current turn, and the turn writer replaces its stored reply.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import cast

from pawwake.chat.prepared import (
    NOTHING,
    ChatRejected,
    PartitionThread,
    StepContext,
    StepInput,
    StepResult,
)
from pawwake.conversations.pending import PENDING_WAIT_SECONDS, Pending, wait_pending
from pawwake.conversations.turn_plan import message_text, repeats_stored_reply
from pawwake.db.partition_state import PartitionState
from pawwake.db.turn_injections import PartitionBreakpoint, PartitionEntry
from pawwake.llm.http import HttpClient
from pawwake.llm.upstream import UsageBooking
from pawwake.llm.upstream_health import UpstreamHealth
from pawwake.local_time import zone_of
from pawwake.partition.layout import Layout, assemble, replay, time_note
from pawwake.partition.rotation import model_folder, model_summariser
from pawwake.partition.thread_rotation import ThreadRead, read_thread, unavailable
from pawwake.settings import Settings
from pawwake.text.messages import ChatMessage
from pawwake.text.rounds import StoredRound, tool_call_id_of


def _without_cache_control(message: ChatMessage) -> ChatMessage:
    """A client message minus its own cache markers (the gateway places the breakpoints)."""
    message = cast(ChatMessage, {k: v for k, v in message.items() if k != "cache_control"})
    content = message.get("content")
    if isinstance(content, list):
        message["content"] = [{k: v for k, v in part.items() if k != "cache_control"}
                              if isinstance(part, dict) else part for part in content]
    return message


def client_tail(messages: Sequence[ChatMessage]) -> tuple[str, list[ChatMessage]]:
    """(``"tool"`` or ``"user"``, the trailing messages of that role) from the client."""
    for role in ("tool", "user"):
        tail: list[ChatMessage] = []
        for message in reversed(messages):
            if message.get("role") != role:
                break
            tail.insert(0, message)
        if tail:
            return role, tail
    raise ChatRejected(400, "partition_turn_missing",
                       "In partition mode the messages must end with a user message or with "
                       "tool results.", param="messages")


def current_turn(rounds: list[StoredRound], role: str, tail: list[ChatMessage],
                 earlier: Sequence[ChatMessage] | None = None
                 ) -> tuple[list[StoredRound], list[ChatMessage], list[ChatMessage]]:
    """(history rounds, current turn for upstream, messages the turn writer compares).

    Tool results continue the last stored round when they answer its pending calls; that
    round is then part of the current turn, never of a zone. ``earlier`` are the client's
    messages before ``tail``: they tell a re-roll from a repeated question.
    """
    last = rounds[-1] if rounds else None
    stored_last = [replay(row) for row in last.messages] if last else []
    if role == "tool":
        pending = last.pending_tool_ids if last else set()
        answers = [_without_cache_control(m) for m in tail if m.get("tool_call_id") in pending]
        if last is not None and not answers:
            rerolled = reanswered_tool_turn(last, tail)
            if rerolled:
                return rounds[:-1], rerolled, rerolled
        if last is None or not answers:
            raise ChatRejected(400, "partition_tool_result_unexpected",
                               "These tool results answer no pending tool call of the "
                               "active thread.", param="messages")
        return rounds[:-1], stored_last + answers, stored_last + answers
    current = [_without_cache_control(m) for m in tail]
    if last is not None and is_reroll(last, tail, earlier or []):
        # The writer sees only the question: with no stored reply before it, it replaces
        # the stored reply (turn_plan.plan_turn) instead of storing the question again.
        return rounds[:-1], current, current
    return rounds, current, stored_last + current


def is_reroll(last: StoredRound, tail: list[ChatMessage], earlier: Sequence[ChatMessage]) -> bool:
    """The client asks again for the answer to the last stored round.

    Same text as that round's question, and either the round has no reply yet, or the
    client sends its history and that history does not end with the stored reply (a
    regenerate button drops it). A client that sends only the latest message cannot show a
    re-roll: the same text from it is the user saying the same thing again, a new round.
    """
    question = last.user
    if question is None or message_text(tail[-1].get("content"))[0] != question["content"]:
        return False
    if not any(row["role"] == "assistant" for row in last.messages[1:]):
        return len(last.messages) == 1
    dialogue = [m for m in earlier if isinstance(m, dict)
                and m.get("role") not in ("system", "developer")]
    return bool(dialogue) and not repeats_stored_reply(dialogue, last.messages[1:])


def reanswered_tool_turn(last: StoredRound, tail: list[ChatMessage]) -> list[ChatMessage]:
    """A re-roll after tool results: the client sends again results the last round already
    holds. The round up to the last of those results (as stored) becomes the current turn;
    what followed is what the turn writer replaces. Empty when this is no such re-roll."""
    ids = {m.get("tool_call_id") for m in tail}
    positions = [index for index, row in enumerate(last.messages)
                 if row["role"] == "tool" and tool_call_id_of(row) in ids]
    if not positions:
        return []
    return [replay(row) for row in last.messages[:positions[-1] + 1]]


def breakpoints(messages: list[ChatMessage]) -> list[PartitionBreakpoint]:
    """Where the cache breakpoints sit: message index and role, in order."""
    found: list[PartitionBreakpoint] = []
    for index, message in enumerate(messages):
        content = message.get("content")
        parts = content if isinstance(content, list) else []
        marked = sum(1 for part in parts if isinstance(part, dict) and "cache_control" in part)
        found.extend({"message": index, "role": message.get("role")} for _ in range(marked))
    return found


def partition_record(thread: str, state: PartitionState, layout: Layout,
                     messages: list[ChatMessage]) -> PartitionEntry:
    """The partition layout of one request, for the injected record."""
    summary = [part for part in state.summary_parts if part.strip()]
    return {"kind": "partition", "thread": thread, "summary_parts": len(summary),
            "zone_a_rounds": layout.zone_a_rounds, "zone_b_rounds": layout.zone_b_rounds,
            "messages": len(messages), "breakpoints": breakpoints(messages),
            "text": "\n\n".join(summary)}


def active_thread(settings: Settings) -> str:
    """The thread every client continues in partition mode: PARTITION_SESSION_ID. Session ids
    sent by clients are ignored here, so switching client continues the same conversation."""
    return settings.PARTITION_SESSION_ID or "default"


@dataclass
class ThreadTurn:
    """The request's turn in the active thread: what both partition layouts build from."""

    thread: str
    role: str  # "user" or "tool": what the client's trailing block holds
    now: datetime  # local time: decides time-window rotations and the time note
    x: int
    read: ThreadRead

    @property
    def state(self) -> PartitionState:
        return self.read.state

    @property
    def continued(self) -> PartitionThread:
        """What the request keeps of it: the thread, its state, the messages compared."""
        return PartitionThread(self.thread, self.read.state, self.read.compared)


@dataclass(frozen=True)
class PartitionParts:
    """What the partition steps work with besides the request: whether a database is
    configured (one not connected yet is a 503, not plain forwarding), the HTTP client and the
    provider's health for the summary model, and the sessions whose turn is being stored."""

    database_configured: bool
    http: HttpClient
    upstream_health: UpstreamHealth
    pending: Pending


async def thread_turn(parts: PartitionParts, context: StepContext, request: StepInput
                      ) -> ThreadTurn | None:
    """Read (and rotate when due) the active thread for this request; None when partition
    mode does not apply to it. The state is read once per request: the result's ``thread``
    carries it to the later steps."""
    settings = context.settings
    # DATABASE_ENABLED=false is plain forwarding: the partition cache is off with it.
    if not settings.CACHE_PARTITION_ENABLED or request.auxiliary:
        return None
    if context.database is None:
        if parts.database_configured:  # configured, not connected yet
            raise unavailable()
        return None
    thread = active_thread(settings)
    messages = list(request.client_messages)
    role, tail = client_tail(messages)
    earlier = messages[:len(messages) - len(tail)]
    booking = UsageBooking(context.database.pool, "summary", thread,
                           health=parts.upstream_health)
    now = context.clock().astimezone(zone_of(settings))
    # This process's last turn of the thread is stored first (read your writes).
    await wait_pending(parts.pending, thread, PENDING_WAIT_SECONDS)
    read = await read_thread(
        context.database.pool, thread, settings,
        lambda rounds: current_turn(rounds, role, tail, earlier),
        model_summariser(parts.http.session, settings, booking),
        model_folder(parts.http.session, settings, booking), now)
    return ThreadTurn(thread, role, now, max(1, int(settings.CACHE_PARTITION_X)), read)


async def partition_context(parts: PartitionParts, context: StepContext, request: StepInput
                            ) -> StepResult:
    """Partition mode: the upstream messages are laid out from the active thread (the persona
    and summary parts first, zones A and B, then the current turn with the time note); the
    turn is stored in that thread. Runs first, so later turn blocks land in the current turn."""
    turn = await thread_turn(parts, context, request)
    if turn is None:
        return NOTHING
    settings, read = context.settings, turn.read
    messages, layout = assemble(persona="\n\n".join(request.system_parts),
                                summary_parts=read.state.summary_parts, history=read.history,
                                current=read.current, x=turn.x, ttl=settings.CACHE_TTL,
                                note=time_note(turn.now))
    return StepResult(
        thread=turn.continued, layout={**request.body, "messages": messages},
        injected=(partition_record(turn.thread, read.state, layout, messages),))
