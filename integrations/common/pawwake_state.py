"""Local state of the Pawwake hooks in ~/.cache/pawwake (0700, files 0600).

- ``seen.json``: fragment ids per CLI session that reached the model, with a TTL, sent as
  ``exclude_fragment_ids`` so the same past conversation is not offered twice.
- ``pending.json``: what the recall hook did for a turn that has not finished yet: the prompt
  (Codex's Stop input has no user text; Claude Code's transcript may lag) and the fragment ids it
  printed. The Stop writer runs after the model answered; only then are those ids marked seen.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import pawwake_files

CACHE_DIR = os.path.join("~", ".cache", "pawwake")
SEEN_TTL_SECONDS = 6 * 3600
PENDING_TTL_SECONDS = 24 * 3600
MAX_PENDING = 200


def _folder() -> str:
    return pawwake_files.private_dir(CACHE_DIR)


def _read(name: str) -> dict[str, Any]:
    try:
        with open(os.path.join(_folder(), name), encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write(name: str, data: dict[str, Any]) -> None:
    body = json.dumps(data, ensure_ascii=True).encode("ascii")
    pawwake_files.write_private(os.path.join(_folder(), name), body)


def _fresh(at: Any, ttl: float, now: float) -> bool:
    try:
        return now - float(at) < ttl
    except (TypeError, ValueError):
        return False


def seen_fragments(session_id: str) -> list[str]:
    """Fragment ids already shown in this CLI session and still within the TTL."""
    now = time.time()
    seen = _read("seen.json").get(session_id)
    if not isinstance(seen, dict):
        return []
    return sorted(fid for fid, at in seen.items() if _fresh(at, SEEN_TTL_SECONDS, now))


def mark_fragments_seen(session_id: str, fragment_ids: list[str]) -> None:
    if not session_id or not fragment_ids:
        return
    now = time.time()
    with pawwake_files.locked(_folder()):
        state = _read("seen.json")
        kept: dict[str, Any] = {}
        for sid, ids in state.items():
            fresh = {f: at for f, at in (ids if isinstance(ids, dict) else {}).items()
                     if _fresh(at, SEEN_TTL_SECONDS, now)}
            if fresh:
                kept[sid] = fresh
        kept.setdefault(session_id, {}).update({fid: now for fid in fragment_ids})
        _write("seen.json", kept)


def _key(session_id: str, turn_key: str) -> str:
    return session_id + "\n" + turn_key


def keep_pending(session_id: str, turn_key: str, entry: dict[str, Any],
                 replace_session: bool = False) -> None:
    """Remember a submitted turn until its Stop; ``replace_session`` drops the session's older
    turns (Claude Code runs one turn per session at a time)."""
    now = time.time()
    with pawwake_files.locked(_folder()):
        state = _read("pending.json")
        state = {k: v for k, v in state.items() if isinstance(v, dict)
                 and _fresh(v.get("at"), PENDING_TTL_SECONDS, now)
                 and not (replace_session and v.get("session") == session_id)}
        state[_key(session_id, turn_key)] = {**entry, "session": session_id, "turn": turn_key,
                                             "at": now}
        if len(state) > MAX_PENDING:
            oldest = sorted(state, key=lambda k: float(state[k].get("at", 0)))
            for key in oldest[:len(state) - MAX_PENDING]:
                del state[key]
        _write("pending.json", state)


def find_pending(session_id: str, turn_key: str | None = None) -> dict[str, Any] | None:
    """The pending turn ``turn_key`` of a session, or its newest one when no key is given."""
    now = time.time()
    state = _read("pending.json")
    if turn_key is not None:
        entry = state.get(_key(session_id, turn_key))
        return entry if isinstance(entry, dict) else None
    entries = [v for v in state.values() if isinstance(v, dict)
               and v.get("session") == session_id
               and _fresh(v.get("at"), PENDING_TTL_SECONDS, now)]
    return max(entries, key=lambda v: float(v.get("at", 0))) if entries else None


def update_pending(session_id: str, turn_key: str, remove: bool = False,
                   **fields: Any) -> None:
    with pawwake_files.locked(_folder()):
        state = _read("pending.json")
        key = _key(session_id, turn_key)
        if key not in state:
            return
        if remove:
            del state[key]
        else:
            state[key] = {**state[key], **fields}
        _write("pending.json", state)


def reached_model(entry: dict[str, Any] | None) -> None:
    """The model answered the turn: its printed fragments count as seen from now on."""
    if not entry or not entry.get("fragments"):
        return
    session_id, turn_key = str(entry.get("session") or ""), str(entry.get("turn") or "")
    mark_fragments_seen(session_id, [f for f in entry["fragments"] if isinstance(f, str)])
    update_pending(session_id, turn_key, fragments=[])
