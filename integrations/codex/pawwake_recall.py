#!/usr/bin/env python3
"""Codex UserPromptSubmit hook: print related Pawwake memories and past conversations (Codex
adds plain stdout to the turn as context), keep the prompt and the printed fragment ids for the
Stop writer (Codex's Stop input carries no user text), and send turns spooled while Pawwake was
away. A subagent's prompt (``agent_id`` set) is written by the model, not the person: skipped."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))

import pawwake_hook


def main() -> None:
    hook = pawwake_hook.read_stdin_json()
    if pawwake_hook.text_field(hook, "agent_id"):
        return
    block = pawwake_hook.on_prompt(hook, pawwake_hook.text_field(hook, "turn_id"))
    if block:
        sys.stdout.write(block + "\n")


if __name__ == "__main__":
    pawwake_hook.run(main)
