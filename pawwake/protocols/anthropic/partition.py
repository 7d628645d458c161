"""Partition mode for Messages: history from the active thread, replayed in content blocks
with native ``cache_control`` breakpoints.

The same thread, rotation and zones as chat (``pawwake.partition.step``); only the
layout differs. ``system``: the client's system blocks, then the persona (breakpoint 1) and
the summary parts (breakpoint 2); messages: zone A (breakpoint 3), zone B (breakpoint 4), then
the current turn, which gets the time note, memories and recalled fragments after
everything cached. The client's own breakpoints are removed (Anthropic allows four).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pawwake.chat.prepared import NOTHING, StepContext, StepInput, StepResult
from pawwake.partition.layout import SUMMARY_HEADING, breakpoint_marker, time_note, zone_split
from pawwake.partition.step import PartitionParts, thread_turn
from pawwake.protocols.anthropic.replay import (
    as_messages,
    mark_last,
    merge_turns,
    round_messages,
    without_cache_control,
)
from pawwake.text.messages import ChatMessage
from pawwake.text.rounds import StoredRound


def system_blocks(client_system: Any, persona: str, summary_parts: list[str],
                  marker: dict[str, str]) -> list[dict[str, Any]]:
    """The client's system blocks (unmarked), the persona and the summary parts (marked)."""
    blocks: list[dict[str, Any]]
    if isinstance(client_system, str):
        blocks = [{"type": "text", "text": client_system}] if client_system else []
    elif isinstance(client_system, list):
        blocks = without_cache_control(client_system)
    else:
        blocks = []
    if persona:
        blocks.append({"type": "text", "text": persona, "cache_control": marker})
    parts = [part for part in summary_parts if part.strip()]
    for index, part in enumerate(parts):
        block: dict[str, Any] = {"type": "text",
                                 "text": f"{SUMMARY_HEADING}\n{part}" if index == 0 else part}
        if index == len(parts) - 1:
            block["cache_control"] = marker
        blocks.append(block)
    return blocks


def current_messages(rounds: list[StoredRound], consumed: bool, role: str,
                     compared: Sequence[ChatMessage], client_last: dict[str, Any]
                     ) -> list[dict[str, Any]]:
    """The turn being answered, in Messages form: the client's last message, after the
    stored part of the last round when tool results continue it (``consumed``: the last
    stored round is part of the current turn)."""
    last_message = without_cache_control(client_last)
    if role != "tool" or not consumed or not rounds:
        return [last_message]
    stored = rounds[-1].messages
    if len(compared) > len(stored):  # tool results answering the stored calls
        return [*as_messages(stored), last_message]
    return as_messages(stored[:len(compared)])  # asked again: the stored results stand


def assemble_messages(history: list[StoredRound], current: list[dict[str, Any]], x: int,
                      marker: dict[str, str]) -> list[dict[str, Any]]:
    zone_a, zone_b = zone_split(history, x)
    a_messages = round_messages(zone_a)
    b_messages = round_messages(zone_b)
    if zone_a:
        mark_last(a_messages, marker)
        mark_last(b_messages, marker)
    return merge_turns([*a_messages, *b_messages, *current])


async def messages_partition_context(parts: PartitionParts, context: StepContext,
                                     request: StepInput) -> StepResult:
    """Partition mode for Messages: ``system`` and ``messages`` laid out from the active
    thread; the time note opens the current turn. Runs first, like chat's."""
    turn = await thread_turn(parts, context, request)
    if turn is None:
        return NOTHING
    read = turn.read
    marker = breakpoint_marker(context.settings.CACHE_TTL)
    body = dict(request.body)
    system = system_blocks(body.get("system"), "\n\n".join(request.system_parts),
                           read.state.summary_parts, marker)
    if system:
        body["system"] = system
    else:
        body.pop("system", None)
    if isinstance(body.get("tools"), list):
        body["tools"] = without_cache_control(body["tools"])
    current = current_messages(read.rounds, read.consumed, turn.role, read.compared,
                               body["messages"][-1])
    body["messages"] = assemble_messages(read.history, current, turn.x, marker)
    return StepResult(thread=turn.continued, layout=body, turn_blocks=(time_note(turn.now),))
