#!/usr/bin/env python3
"""Claude Code Stop hook: send the finished turn (the real user text and the final reply) to
Pawwake's POST /api/conversations/turn.

The reply is the Stop input's ``last_assistant_message``: the transcript is written
asynchronously and may not hold the final message yet when Stop fires. The user text is the
prompt the recall hook kept for this session, else the last real user entry of the transcript
(which also holds tool calls and results, hook output, system reminders, slash-command echoes
and sidechain entries; none of that is conversation). Only when Claude Code sends no
``last_assistant_message`` is the reply read from the transcript, and then only a final one:
a message that calls a tool is not an answer. The model has answered, so the fragments printed
for this turn are marked seen now. The turn id (the recall hook's key, else the user entry's
uuid) makes a repeated Stop store the turn once; when another Stop hook made the turn go on
(``stop_hook_active``), the final reply replaces the stored one (``replace_reply``).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))

import pawwake_hook
import pawwake_state
import pawwake_turns

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


def _after_last_prompt(entries: list[dict[str, Any]]
                       ) -> tuple[dict[str, Any] | None, str, list[dict[str, Any]]]:
    """The last real user entry, its cleaned text and the assistant entries after it."""
    user: dict[str, Any] | None = None
    user_text = ""
    replies: list[dict[str, Any]] = []
    for entry in entries:
        if entry.get("isSidechain") or entry.get("isMeta") or entry.get("isCompactSummary"):
            continue
        message = entry.get("message") or {}
        if not isinstance(message, dict):
            continue
        if entry.get("type") == "user" and message.get("role") == "user":
            text, tool = _texts(message.get("content"))
            if tool or "toolUseResult" in entry:
                continue
            text = _clean(text)
            if text:
                user, user_text, replies = entry, text, []
        elif entry.get("type") == "assistant" and user is not None:
            replies.append(entry)
    return user, user_text, replies


def _final_text(replies: list[dict[str, Any]]) -> str:
    """The text of the last assistant message when it is final (calls no tool). Claude Code
    writes one entry per content block, so the entries of that message are joined."""
    if not replies:
        return ""
    last_id = (replies[-1].get("message") or {}).get("id")
    parts = [r for r in replies if last_id is not None
             and (r.get("message") or {}).get("id") == last_id] or replies[-1:]
    texts = []
    for entry in parts:
        message = entry.get("message") or {}
        text, tool = _texts(message.get("content"))
        if tool or message.get("stop_reason") == "tool_use":
            return ""  # the turn is still working (or the transcript lags): no answer yet
        texts.append(text)
    return _clean("\n".join(t for t in texts if t))


def last_turn(entries: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The last real user prompt and what followed it in the transcript."""
    user, user_text, replies = _after_last_prompt(entries)
    if user is None:
        return None
    model = next((m for m in ((r.get("message") or {}).get("model") for r in reversed(replies))
                  if isinstance(m, str) and m), None)
    return {"user": user, "user_text": user_text, "reply_text": _final_text(replies),
            "model": model, "reply_uuid": replies[-1].get("uuid") if replies else None}


def _same_text(a: str, b: str) -> bool:
    """Equal up to whitespace (the transcript and the hook input may wrap differently)."""
    return " ".join(a.split()) == " ".join(b.split())


def _user_side(found: dict[str, Any] | None, pending: dict[str, Any] | None, prompt_id: str
               ) -> tuple[str, str, str] | None:
    """(turn id, user text, occurred_at) of the turn that just ended.

    Claude Code names each prompt (``prompt_id``, also ``promptId`` in the transcript); without
    it the kept prompt names the turn, except when it was already written and the transcript
    shows a newer prompt (the recall hook did not run for that one)."""
    prompt = str((pending or {}).get("prompt") or "")
    stale = bool(not prompt_id and pending and pending.get("written") and found is not None
                 and not _same_text(found["user_text"], prompt))
    if pending and prompt.strip() and not stale:
        return prompt_id or str(pending["turn"]), prompt, pawwake_turns.rfc3339(pending.get("at"))
    if found is not None:
        user = found["user"]
        stamp = user.get("timestamp")
        return (prompt_id or str(user.get("uuid") or user.get("timestamp")), found["user_text"],
                stamp if isinstance(stamp, str) and "T" in stamp else pawwake_turns.rfc3339())
    return None


def _transcript(hook: dict[str, Any]) -> list[dict[str, Any]]:
    path = pawwake_hook.text_field(hook, "transcript_path")
    if not path:
        return []
    try:
        return _entries(os.path.expanduser(path))
    except (OSError, ValueError):
        return []  # not written yet


def build_turn(hook: dict[str, Any], pending: dict[str, Any] | None) -> dict[str, Any] | None:
    session_id = pawwake_hook.text_field(hook, "session_id")
    if not session_id:
        return None
    prompt_id = pawwake_hook.text_field(hook, "prompt_id")
    found = last_turn(_transcript(hook))
    if found is not None and prompt_id and found["user"].get("promptId") not in (None, prompt_id):
        found = None  # the transcript does not hold this prompt yet
    reply = pawwake_hook.text_field(hook, "last_assistant_message").strip()
    prompt = str((pending or {}).get("prompt") or "")
    if not reply and found is not None and (not prompt or _same_text(found["user_text"], prompt)):
        reply = found["reply_text"]  # no last_assistant_message: read the (same) turn's end
    if not reply:
        return None
    side = _user_side(found, pending, prompt_id)
    if side is None:
        return None
    turn_id, user_text, occurred_at = side
    extra: dict[str, Any] = {"source": "claude-code", "metadata": {"cwd": hook.get("cwd")}}
    if found is not None and found.get("model"):
        extra["model"] = found["model"]
    if hook.get("stop_hook_active") is True:
        return pawwake_turns.continuation(session_id, turn_id, user_text, reply, occurred_at,
                                          extra)
    if found is not None and found.get("reply_uuid") and found["reply_text"] == reply:
        extra["metadata"]["reply_uuid"] = found["reply_uuid"]
    return pawwake_turns.full_turn(session_id, turn_id, user_text, reply, occurred_at, extra)


def main() -> None:
    hook = pawwake_hook.read_stdin_json()
    session_id = pawwake_hook.text_field(hook, "session_id")
    prompt_id = pawwake_hook.text_field(hook, "prompt_id")
    pending = (pawwake_state.find_pending(session_id, prompt_id or None) if session_id
               else None)
    pawwake_state.reached_model(pending)
    turn = build_turn(hook, pending)
    pawwake_hook.write_turn(turn)
    if pending is not None and turn is not None:
        pawwake_state.update_pending(session_id, str(pending["turn"]), written=True)


if __name__ == "__main__":
    pawwake_hook.run(main)
