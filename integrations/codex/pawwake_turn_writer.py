#!/usr/bin/env python3
"""Codex Stop hook: send the finished turn to Pawwake's POST /api/conversations/turn.

Codex gives the Stop hook ``session_id``, ``turn_id`` and ``last_assistant_message`` on stdin;
the user's prompt of the same turn was kept by the recall hook. The model has answered, so the
fragments printed for this turn are marked seen now. Codex's turn id is the idempotency key: a
repeated Stop stores nothing twice. When another Stop hook made the turn go on
(``stop_hook_active``), the further reply is stored as its own assistant message.

Codex validates a Stop hook's stdout as JSON: ``{}`` is printed on every path.
"""

from __future__ import annotations

import os
import sys
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))

import pawwake_hook
import pawwake_state
import pawwake_turns


def build_turn(hook: dict[str, Any], pending: dict[str, Any] | None) -> dict[str, Any] | None:
    session_id = pawwake_hook.text_field(hook, "session_id")
    turn_id = pawwake_hook.text_field(hook, "turn_id")
    reply = pawwake_hook.text_field(hook, "last_assistant_message")
    if not (session_id and turn_id and reply):
        return None
    extra: dict[str, Any] = {"source": "codex", "metadata": {"cwd": hook.get("cwd")}}
    if pawwake_hook.text_field(hook, "model"):
        extra["model"] = hook["model"]
    if hook.get("stop_hook_active") is True:
        return pawwake_turns.continuation(session_id, turn_id, reply, extra)
    prompt = str((pending or {}).get("prompt") or "")
    if not prompt.strip():
        return None  # no real user text for this turn (the recall hook did not run)
    return pawwake_turns.full_turn(session_id, turn_id, prompt, reply,
                                   pawwake_turns.rfc3339((pending or {}).get("at")), extra)


def main() -> None:
    hook = pawwake_hook.read_stdin_json()
    session_id = pawwake_hook.text_field(hook, "session_id")
    turn_id = pawwake_hook.text_field(hook, "turn_id")
    pending = pawwake_state.find_pending(session_id, turn_id) if session_id and turn_id else None
    pawwake_state.reached_model(pending)
    turn = build_turn(hook, pending)
    pawwake_hook.write_turn(turn)
    if pending is not None and turn is not None:
        pawwake_state.update_pending(session_id, turn_id, remove=True)


if __name__ == "__main__":
    pawwake_hook.run(main, stop_json=True)
