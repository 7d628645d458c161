"""A bounded local spool for turns Pawwake could not take (unreachable, 5xx, timeout).

One file per turn in ~/.config/pawwake/spool (folder 0700, files 0600, fsynced), named by the
time it was kept and a digest of ``source + session_id + turn_id``, so a repeated Stop keeps a
turn once; a continued turn (``replace_reply``) overwrites its kept file with the final reply. The spool is bounded in files and bytes; when it is full the oldest turns are kept
and the new one is refused (the caller says so on stderr). Any later hook run sends the spooled
turns, oldest first, within a short time budget; the server's ``turn_id`` idempotency makes a
resend after a lost answer harmless. A turn the server refuses as invalid (400/413/422) can never
be stored: it is renamed ``*.rejected``, no longer sent, and still counts toward the bound.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
import urllib.error
from collections.abc import Callable
from typing import Any

import pawwake_files

SPOOL_DIR = os.path.join("~", ".config", "pawwake", "spool")
SPOOL_MAX_FILES = 100
SPOOL_MAX_BYTES = 16 * 1024 * 1024
PERMANENT_STATUSES = (400, 413, 422)
MIN_ATTEMPT_SECONDS = 0.05


def _folder() -> str:
    return pawwake_files.private_dir(SPOOL_DIR)


def _digest(turn: dict[str, Any]) -> str:
    identity = "\n".join(str(turn.get(k, "")) for k in ("source", "session_id", "turn_id"))
    return hashlib.sha256(identity.encode("utf-8", "replace")).hexdigest()[:24]


def _entries(folder: str) -> list[os.DirEntry[str]]:
    return [e for e in os.scandir(folder)
            if e.is_file() and not e.name.startswith(".")
            and (e.name.endswith(".json") or e.name.endswith(".rejected"))]


def spool_turn(turn: dict[str, Any], suffix: str = ".json") -> bool:
    """Keep ``turn`` for a later hook run; False when the spool is full (nothing written).
    ``suffix=".rejected"`` keeps a turn Pawwake refused, for the person to look at."""
    data = json.dumps(turn, ensure_ascii=True).encode("ascii")
    folder = _folder()
    digest = _digest(turn)
    with pawwake_files.locked(folder):
        entries = _entries(folder)
        kept = [e for e in entries if e.name.split(".")[0].endswith("-" + digest)]
        if kept:  # already kept: a repeated Stop, or a continued turn with its final reply
            if turn.get("replace_reply") and kept[0].name.endswith(".json"):
                used = sum(e.stat().st_size for e in entries) - kept[0].stat().st_size
                if used + len(data) > SPOOL_MAX_BYTES:
                    return False
                pawwake_files.write_private(kept[0].path, data)  # same name: same place
            return True
        used = sum(e.stat().st_size for e in entries)
        if len(entries) >= SPOOL_MAX_FILES or used + len(data) > SPOOL_MAX_BYTES:
            return False
        name = f"{time.time_ns():020d}-{digest}{suffix}"
        pawwake_files.write_private(os.path.join(folder, name), data)
    return True


def forget(turn: dict[str, Any]) -> None:
    """Drop a kept copy of ``turn`` (sent directly just now): an older reply of a continued
    turn must not be sent after the final one."""
    path = os.path.expanduser(SPOOL_DIR)
    if not os.path.isdir(path):
        return
    folder = _folder()
    digest = _digest(turn)
    with pawwake_files.locked(folder):
        for entry in _entries(folder):
            if entry.name.endswith(".json") and entry.name.split(".")[0].endswith("-" + digest):
                os.unlink(entry.path)
                pawwake_files.sync_dir(folder)


def deliver(send: Callable[[dict[str, Any], float], Any], budget: float) -> bool:
    """Send spooled turns oldest first until done or ``budget`` seconds are used.

    ``send(turn, timeout)`` posts one turn and raises on failure. A turn Pawwake answers with
    another error (5xx, 429) stays and the next one is tried, so one turn the server cannot take
    now does not hold up the rest. Returns False when Pawwake cannot be reached or refuses the
    key (the caller then spools its own turn without trying), True otherwise.
    """
    path = os.path.expanduser(SPOOL_DIR)
    if not os.path.isdir(path):
        return True
    folder = _folder()
    deadline = time.monotonic() + budget
    with pawwake_files.locked(folder, ".deliver.lock", wait=False) as held:
        if not held:
            return True  # another hook is sending them right now
        for name in sorted(e.name for e in _entries(folder) if e.name.endswith(".json")):
            remaining = deadline - time.monotonic()
            if remaining < MIN_ATTEMPT_SECONDS:
                break
            file_path = os.path.join(folder, name)
            try:
                with open(file_path, encoding="ascii") as handle:
                    turn = json.load(handle)
            except (OSError, ValueError):
                _reject(folder, name, "unreadable")
                continue
            try:
                send(turn, remaining)
            except urllib.error.HTTPError as exc:
                if exc.code in PERMANENT_STATUSES:
                    _reject(folder, name, f"HTTP {exc.code}")
                elif exc.code in (401, 403):
                    return False
                continue
            except (OSError, ValueError):
                return False
            os.unlink(file_path)
            pawwake_files.sync_dir(folder)
    return True


def _reject(folder: str, name: str, why: str) -> None:
    os.replace(os.path.join(folder, name), os.path.join(folder, name[:-5] + ".rejected"))
    sys.stderr.write(f"pawwake hook: a spooled turn was refused ({why}); kept as"
                     f" {os.path.join(SPOOL_DIR, name[:-5] + '.rejected')}\n")
