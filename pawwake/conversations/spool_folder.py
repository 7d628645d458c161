"""Which spool folder a gateway process writes to: its own, also when several processes share
one data folder (replicas mounting one volume).

A process owns a folder while it holds an exclusive ``flock`` on the lock file beside it
(``turn-spool.lock``); the kernel releases it when the process ends, however it ends
(``kill -9`` included). The first process takes ``turn-spool``, the next ``turn-spool-2`` and so on. A
folder whose owner is gone and that still holds turns is adopted by a process on the same data
folder: its turns are moved into the adopter's folder (the names keep the order the turns
finished), so each spooled turn is replayed once, by one process, whether its own replica
returns or not.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)

MAX_FOLDERS = 64  # processes that can share one data folder
TURN_FILES = ("*.json", "*.failed")  # what a folder holds that is worth moving


def _try_lock(folder: Path) -> int | None:
    """An open, exclusively locked descriptor of ``folder``'s lock file (made with the folder
    when missing), or None when another process holds it."""
    folder.mkdir(parents=True, exist_ok=True)
    lock = folder.with_name(folder.name + ".lock")
    descriptor = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        return None
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


class SpoolFolders:
    """The spool folders under one data folder, and the one this process owns."""

    def __init__(self, primary: Path) -> None:
        self.primary = primary  # <data dir>/turn-spool
        self.owned: Path | None = None
        self._descriptor: int | None = None

    def candidates(self) -> list[Path]:
        return [self.primary] + [self.primary.with_name(f"{self.primary.name}-{n}")
                                 for n in range(2, MAX_FOLDERS + 1)]

    def existing(self) -> list[Path]:
        parent = self.primary.parent
        if not parent.is_dir():
            return []
        present = {path.name for path in parent.glob(self.primary.name + "*")}
        return [folder for folder in self.candidates()
                if folder.name in present and folder.is_dir()]

    def claim(self) -> Path:
        """The folder this process writes to (claimed on first call, kept until ``release``)."""
        if self.owned is not None:
            return self.owned
        for folder in self.candidates():
            descriptor = _try_lock(folder)
            if descriptor is not None:
                self.owned, self._descriptor = folder, descriptor
                if folder != self.primary:
                    log.info("the data folder is shared with another gateway process; this "
                             "one spools turns in %s", folder.name)
                return folder
        raise OSError(f"more than {MAX_FOLDERS} gateway processes share one data folder")

    def adopt_orphans(self) -> list[str]:
        """Move the turns of folders whose owner is gone into this process's folder; returns
        the names of the files moved."""
        own = self.claim()
        moved: list[str] = []
        for folder in self.existing():
            if folder == own or not any(next(folder.glob(p), None) for p in TURN_FILES):
                continue
            descriptor = _try_lock(folder)
            if descriptor is None:
                continue  # its owner is alive
            try:
                for pattern in TURN_FILES:
                    for path in sorted(folder.glob(pattern)):
                        os.replace(path, own / path.name)
                        moved.append(path.name)
                for stale in folder.glob("*.tmp"):
                    stale.unlink(missing_ok=True)  # never renamed: its turn was not spooled
            finally:
                os.close(descriptor)
        if moved:
            sync_folder(own)
            log.info("adopted %d spooled turn(s) left by a gateway process that stopped",
                     len(moved))
        return moved

    def release(self) -> None:
        if self._descriptor is not None:
            with contextlib.suppress(OSError):
                os.close(self._descriptor)
        self._descriptor, self.owned = None, None


def sync_folder(folder: Path) -> None:
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
