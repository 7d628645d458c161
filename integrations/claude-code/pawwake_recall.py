#!/usr/bin/env python3
"""Claude Code UserPromptSubmit hook: print Pawwake memories and past conversations related to
the prompt; Claude Code adds what this prints to the turn's context."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))

import pawwake_hook


def main() -> None:
    block = pawwake_hook.recall(pawwake_hook.read_stdin_json(), "claude-code")
    if block:
        sys.stdout.write(block + "\n")


if __name__ == "__main__":
    pawwake_hook.run(main)
