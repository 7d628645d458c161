#!/usr/bin/env python3
"""Codex Stop hook: send the finished turn to Pawwake's POST /api/conversations/turn.

Codex gives the Stop hook ``session_id``, ``turn_id`` and ``last_assistant_message`` on stdin;
the user's prompt of the same turn was kept by the recall hook. The Codex turn id is the
idempotency key, so a repeated Stop (``stop_hook_active``) stores nothing twice.
"""

from __future__ import annotations

import os
import sys
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))

import pawwake_hook


def main() -> None:
    hook = pawwake_hook.read_stdin_json()
    session_id, turn_id = hook.get("session_id"), hook.get("turn_id")
    reply = hook.get("last_assistant_message")
    if not all(isinstance(v, str) and v.strip() for v in (session_id, turn_id, reply)):
        return
    kept = pawwake_hook.take_prompt(session_id, turn_id)
    if kept is None or not str(kept.get("prompt") or "").strip():
        return  # no real user text for this turn (the recall hook did not run)
    turn: dict[str, Any] = {
        "turn_id": turn_id,
        "session_id": session_id,
        "source": "codex",
        "messages": [{"role": "user", "content": kept["prompt"]},
                     {"role": "assistant", "content": reply}],
        "metadata": {"cwd": hook.get("cwd")},
    }
    if isinstance(hook.get("model"), str) and hook["model"]:
        turn["model"] = hook["model"]
    try:
        pawwake_hook.send_turn(turn)
    except (OSError, ValueError):
        pawwake_hook.remember_prompt(session_id, turn_id, kept["prompt"])  # retry next Stop
        raise


if __name__ == "__main__":
    pawwake_hook.run(main)
