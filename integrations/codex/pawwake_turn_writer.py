#!/usr/bin/env python3
"""Codex Stop hook: send the finished turn to Pawwake's POST /api/conversations/turn.

Codex gives the Stop hook ``session_id``, ``turn_id`` and ``last_assistant_message`` on stdin;
the user's prompt of the same turn was kept by the recall hook. The model has answered, so the
fragments printed for this turn are marked seen now. Codex's turn id is the idempotency key: a
repeated Stop stores nothing twice. When another Stop hook made the turn go on
(``stop_hook_active``), the turn is sent again with its final reply and ``replace_reply``: the
stored reply becomes the final one (the kept prompt stays until its TTL for this).

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
    prompt = str((pending or {}).get("prompt") or "")
    occurred_at = pawwake_turns.rfc3339((pending or {}).get("at"))
    if hook.get("stop_hook_active") is True:
        return pawwake_turns.continuation(session_id, turn_id, prompt, reply, occurred_at, extra)
    if not prompt.strip():
        return None  # no real user text for this turn (the recall hook did not run)
    return pawwake_turns.full_turn(session_id, turn_id, prompt, reply, occurred_at, extra)


def main() -> None:
    hook = pawwake_hook.read_stdin_json()
    session_id = pawwake_hook.text_field(hook, "session_id")
    turn_id = pawwake_hook.text_field(hook, "turn_id")
    pending = pawwake_state.find_pending(session_id, turn_id) if session_id and turn_id else None
    pawwake_state.reached_model(pending)
    if os.environ.get("PAWWAKE_EXEC_WRITER") == "1":
        return  # a `codex exec` run under pawwake_exec.py: that wrapper stores the turn
    turn = build_turn(hook, pending)
    pawwake_hook.write_turn(turn)
    if pending is not None and turn is not None:  # kept for a continuation's Stop (TTL)
        pawwake_state.update_pending(session_id, turn_id, written=True)


if __name__ == "__main__":
    pawwake_hook.run(main, stop_json=True)
