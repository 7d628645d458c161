"""Partition mode for Messages: history from the active thread, replayed in content blocks
with native ``cache_control`` breakpoints.

The same thread, rotation and zones as chat (``pawwake.chat.partition_step``); only the
layout differs. ``system``: the client's system blocks, then the persona (breakpoint 1) and
the summary parts (breakpoint 2); messages: zone A (breakpoint 3), zone B (breakpoint 4), then
the current turn, which gets the time note, memories and recalled fragments after
everything cached. The client's own breakpoints are removed (Anthropic allows four).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from pawwake.chat.partition import SUMMARY_HEADING, breakpoint_marker, time_note, zone_split
from pawwake.chat.partition_step import thread_turn
from pawwake.chat.pipeline import ChatStep
from pawwake.protocols.anthropic.replay import (
    as_messages,
    mark_last,
    merge_turns,
    round_messages,
    without_cache_control,
)
from pawwake.text.rounds import Round


def system_blocks(client_system: Any, persona: str, summary_parts: list[str],
                  marker: dict[str, str]) -> list[dict[str, Any]]:
    """The client's system blocks (unmarked), the persona and the summary parts (marked)."""
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


def current_messages(rounds: list[Round], consumed: bool, role: str,
                     compared: list[dict[str, Any]], client_last: dict[str, Any]
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


def assemble_messages(history: list[Round], current: list[dict[str, Any]], x: int,
                      marker: dict[str, str]) -> list[dict[str, Any]]:
    zone_a, zone_b = zone_split(history, x)
    a_messages = round_messages(zone_a)
    b_messages = round_messages(zone_b)
    if zone_a:
        mark_last(a_messages, marker)
        mark_last(b_messages, marker)
    return merge_turns([*a_messages, *b_messages, *current])


def messages_partition_step(app: web.Application, *,
                            clock: Callable[[], datetime] | None = None) -> ChatStep:
    """Build the step (registered before the memory steps, like chat's)."""
    now_utc = clock or (lambda: datetime.now(UTC))

    async def step(context: Any, prepared: Any) -> None:
        turn = await thread_turn(app, context, prepared, now_utc)
        if turn is None:
            return
        settings, read = context.settings, turn.read
        marker = breakpoint_marker(settings.CACHE_TTL)
        body = prepared.body
        persona = "\n\n".join(prepared.system_parts)
        prepared.system_parts.clear()
        system = system_blocks(body.get("system"), persona, read.state.summary_parts, marker)
        if system:
            body["system"] = system
        else:
            body.pop("system", None)
        if isinstance(body.get("tools"), list):
            body["tools"] = without_cache_control(body["tools"])
        current = current_messages(read.rounds, read.consumed, turn.role, read.compared,
                                   body["messages"][-1])
        body["messages"] = assemble_messages(read.history, current, turn.x, marker)
        prepared.turn_blocks.insert(0, time_note(turn.now))
        prepared.client_messages = read.compared

    return step
