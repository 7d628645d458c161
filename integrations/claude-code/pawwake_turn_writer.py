#!/usr/bin/env python3
"""Claude Code Stop hook: send the finished turn (the last real user text and the final reply)
to Pawwake's POST /api/conversations/turn.

The transcript (JSONL, one entry per line) also holds tool calls and results, hook output,
system reminders, slash-command echoes and sidechain (subagent) entries; none of that is
conversation, so it is skipped. The turn id is the uuid of the user entry, so a retried or
repeated Stop for the same prompt stores the turn once.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))

import pawwake_hook

SCAFFOLD_PREFIXES = ("<system-reminder>", "<user-prompt-submit-hook>", "<command-name>",
                     "<command-message>", "<local-command-stdout>", "<local-command-stderr>",
                     "<pawwake_history_reference>", "Caveat: The messages below")


def _entries(path: str) -> list[dict[str, Any]]:
    entries = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            line = line.strip()
            if not line:
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict):
                entries.append(entry)
    return entries


def _texts(content: Any) -> tuple[str, bool]:
    """Plain text of a message and whether it carried tool traffic."""
    if isinstance(content, str):
        return content, False
    texts, tool = [], False
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif part.get("type") in ("tool_use", "tool_result"):
            tool = True
    return "\n".join(texts), tool


def _clean(text: str) -> str:
    """Drop injected blocks; what is left is what the person typed."""
    kept = []
    for block in text.split("\n\n"):
        if not block.strip().startswith(SCAFFOLD_PREFIXES):
            kept.append(block)
    return "\n\n".join(kept).strip()


def last_turn(entries: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The last real user prompt and the final assistant text after it."""
    user: dict[str, Any] | None = None
    user_text = ""
    replies: list[dict[str, Any]] = []
    for entry in entries:
        if entry.get("isSidechain") or entry.get("isMeta") or entry.get("isCompactSummary"):
            continue
        message = entry.get("message") or {}
        if entry.get("type") == "user" and message.get("role") == "user":
            text, tool = _texts(message.get("content"))
            if tool or "toolUseResult" in entry:
                continue
            text = _clean(text)
            if text:
                user, user_text, replies = entry, text, []
        elif entry.get("type") == "assistant" and user is not None:
            replies.append(entry)
    if user is None or not replies:
        return None
    final = replies[-1]
    text, _tool = _texts((final.get("message") or {}).get("content"))
    text = _clean(text)
    if not text:
        return None  # the turn ended in a tool call: nothing final to store yet
    return {"user": user, "user_text": user_text, "final": final, "reply_text": text}


def main() -> None:
    hook = pawwake_hook.read_stdin_json()
    path = hook.get("transcript_path")
    session_id = hook.get("session_id")
    if not isinstance(path, str) or not isinstance(session_id, str) or not session_id:
        return
    found = last_turn(_entries(os.path.expanduser(path)))
    if found is None:
        return
    user = found["user"]
    turn: dict[str, Any] = {
        "turn_id": str(user.get("uuid") or user.get("timestamp")),
        "session_id": session_id,
        "source": "claude-code",
        "messages": [{"role": "user", "content": found["user_text"]},
                     {"role": "assistant", "content": found["reply_text"]}],
        "metadata": {"cwd": hook.get("cwd"), "reply_uuid": found["final"].get("uuid")},
    }
    model = (found["final"].get("message") or {}).get("model")
    if isinstance(model, str) and model:
        turn["model"] = model
    stamp = user.get("timestamp")
    if isinstance(stamp, str) and "T" in stamp:
        turn["occurred_at"] = stamp
    pawwake_hook.send_turn(turn)


if __name__ == "__main__":
    pawwake_hook.run(main)
