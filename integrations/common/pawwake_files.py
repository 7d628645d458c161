"""Private files of the Pawwake hooks (standard library only, Python 3.9+).

Everything the hooks keep on disk holds conversation text or ids, so folders are 0700, files
are 0600 and written atomically (temporary file, fsync, rename). Hooks of several sessions may
run at once, so read-modify-write goes under an advisory lock where the OS has one.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; the worst case is a lost seen mark
    fcntl = None  # type: ignore[assignment]


def private_dir(path: str) -> str:
    """Create ``path`` (and parents) and keep it 0700; returns the expanded path."""
    path = os.path.expanduser(path)
    os.makedirs(path, mode=0o700, exist_ok=True)
    if os.name == "posix" and os.stat(path).st_mode & 0o077:
        os.chmod(path, 0o700)
    return path


def write_private(path: str, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically, mode 0600, flushed to disk."""
    folder = os.path.dirname(path)
    handle, temp = tempfile.mkstemp(dir=folder, prefix=".tmp-")
    try:
        os.chmod(temp, 0o600)
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    sync_dir(folder)


def sync_dir(folder: str) -> None:
    """fsync a folder so a rename or unlink in it survives a crash (POSIX only)."""
    if os.name != "posix":
        return
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def locked(folder: str, name: str = ".lock", wait: bool = True) -> Iterator[bool]:
    """Hold an advisory lock on ``folder/name``; yields False when ``wait`` is off and another
    process holds it (the caller then skips its work)."""
    if fcntl is None:
        yield True
        return
    fd = os.open(os.path.join(folder, name), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        held = True
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            held = False
        yield held
    finally:
        os.close(fd)  # closing releases the lock
