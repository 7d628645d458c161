#!/usr/bin/env python3
"""Run ``codex exec`` and store the run in Pawwake: the real input and the final message only.

    python3 pawwake_exec.py [codex exec options...] "PROMPT"
    echo "PROMPT" | python3 pawwake_exec.py [codex exec options...] -

``codex exec`` writes its progress to stderr and the final assistant message to stdout (or, with
``--json``, an event stream). None of that is conversation text: both streams pass through to
your terminal untouched and are never read. The final message comes from Codex's own
``--output-last-message`` file (a private temporary file unless you give one), and it is stored
only when the run succeeded. The turn goes to POST /api/conversations/turn like the Stop hook's
(spooled while Pawwake is away); ``PAWWAKE_EXEC_WRITER=1`` is set for the run so that the Codex
Stop hook, when installed, does not store the same turn a second time. The exit status is
Codex's own.

Session: ``PAWWAKE_SESSION_ID`` when set, else ``codex-exec`` (one thread of exec runs, so
memories are extracted every MEMORY_EXTRACT_INTERVAL runs). Codex binary: ``PAWWAKE_CODEX_BIN``
or ``codex`` on PATH.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))

import pawwake_hook
import pawwake_turns

LAST_MESSAGE_FLAGS = ("-o", "--output-last-message")
MODEL_FLAGS = ("-m", "--model")
USAGE = ("usage: pawwake_exec.py [codex exec options...] PROMPT\n"
         "       (PROMPT last; \"-\" reads it from stdin)\n")


def option_value(options: list[str], names: tuple[str, ...]) -> str | None:
    """The value of ``--name value`` or ``--name=value`` among ``options``."""
    for index, option in enumerate(options):
        if option in names and index + 1 < len(options):
            return options[index + 1]
        for name in names:
            if name.startswith("--") and option.startswith(name + "="):
                return option[len(name) + 1:]
    return None


def read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read().strip()
    except OSError:
        return ""


def build_turn(prompt: str, final: str, model: str | None, started: float) -> dict[str, Any]:
    extra: dict[str, Any] = {"source": "codex",
                             "metadata": {"cwd": os.getcwd(), "mode": "exec"}}
    if model:
        extra["model"] = model
    session_id = os.environ.get("PAWWAKE_SESSION_ID", "").strip() or "codex-exec"
    return pawwake_turns.full_turn(session_id, "exec-" + uuid.uuid4().hex, prompt, final,
                                   pawwake_turns.rfc3339(started), extra)


def run_codex(options: list[str], prompt_arg: str, stdin_text: str | None) -> tuple[int, str]:
    """Run ``codex exec``; its stdout and stderr go straight to ours. Returns (status, final
    message)."""
    codex = os.environ.get("PAWWAKE_CODEX_BIN", "").strip() or "codex"
    given = option_value(options, LAST_MESSAGE_FLAGS)
    folder = None if given else tempfile.mkdtemp(prefix="pawwake-exec-")  # 0700
    path = given or os.path.join(folder or "", "last-message.txt")
    command = [codex, "exec", *options]
    if not given:
        command += ["--output-last-message", path]
    command.append(prompt_arg)
    environment = {**os.environ, "PAWWAKE_EXEC_WRITER": "1"}
    try:
        done = subprocess.run(command, env=environment, check=False,
                              input=stdin_text.encode("utf-8") if stdin_text is not None
                              else None)
        return done.returncode, read_text(path) if done.returncode == 0 else ""
    finally:
        if folder is not None:
            for name in os.listdir(folder):
                os.unlink(os.path.join(folder, name))
            os.rmdir(folder)


def main(argv: list[str]) -> int:
    if not argv or (argv[-1].startswith("-") and argv[-1] != "-"):
        sys.stderr.write(USAGE)
        return 2
    options, prompt_arg = argv[:-1], argv[-1]
    stdin_text = sys.stdin.read() if prompt_arg == "-" else None
    prompt = (stdin_text if stdin_text is not None else prompt_arg).strip()
    started = time.time()
    try:
        status, final = run_codex(options, prompt_arg, stdin_text)
    except OSError as exc:
        sys.stderr.write(f"pawwake exec: could not run codex ({type(exc).__name__})\n")
        return 127
    if status == 0 and prompt and final:
        turn = build_turn(prompt, final, option_value(options, MODEL_FLAGS), started)
        try:
            pawwake_hook.write_turn(turn)
        except pawwake_hook.ConfigError as exc:
            sys.stderr.write(f"pawwake exec: {exc}\n")
        except (OSError, ValueError):
            pass  # never change what the run itself did
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
