#!/usr/bin/env python3
"""Claude Code UserPromptSubmit hook: print Pawwake memories and past conversations related to
the prompt (Claude Code adds what this prints to the turn's context), keep the prompt and the
printed fragment ids for the Stop writer, and send turns spooled while Pawwake was away."""

from __future__ import annotations

import os
import sys
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))

import pawwake_hook


def main() -> None:
    hook = pawwake_hook.read_stdin_json()
    # One turn runs per session at a time; prompt_id, where Claude Code sends it, names it.
    turn_key = pawwake_hook.text_field(hook, "prompt_id") or "p-" + uuid.uuid4().hex
    block = pawwake_hook.on_prompt(hook, turn_key, replace_session=True)
    if block:
        sys.stdout.write(block + "\n")


if __name__ == "__main__":
    pawwake_hook.run(main)
