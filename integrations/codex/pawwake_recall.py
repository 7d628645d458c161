#!/usr/bin/env python3
"""Codex UserPromptSubmit hook: print related Pawwake memories and past conversations (Codex
adds the hook's stdout to the turn as context) and keep the prompt for the Stop writer."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))

import pawwake_hook


def main() -> None:
    hook = pawwake_hook.read_stdin_json()
    session_id, turn_id, prompt = hook.get("session_id"), hook.get("turn_id"), hook.get("prompt")
    if all(isinstance(v, str) and v for v in (session_id, turn_id, prompt)):
        pawwake_hook.remember_prompt(session_id, turn_id, prompt)
    block = pawwake_hook.recall(hook, "codex")
    if block:
        sys.stdout.write(block + "\n")


if __name__ == "__main__":
    pawwake_hook.run(main)
