"""Giving memory back after a burst of embeddings: the model file's sparsely read pages and
the C heap's free pages.

The engine memory-maps its model file. Its tokenizer tables are copied out at load and never
read again, and its 54 MB vocabulary table is read one row per token: every new word pages in
a row that stays resident although it may never be read again, so after many varied texts
the mapping holds tens of MB the next query mostly does not need. The pieces (probed all over
by tokenizing) and the layers' weights (read by every call) stay. Dropping a
clean page of a private file mapping only unmaps it: the page cache keeps it, and the next
read of that row is a minor fault (microseconds). The engine's activation buffers grow the
C heap under a burst; glibc keeps the freed pages until ``malloc_trim``.

``IdleRelease`` does both once the engine has been idle for ``IDLE_SECONDS`` after some work,
off the event loop.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import mmap
import struct
import time
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

IDLE_SECONDS = 2.0
MADV_DONTNEED = 4
_MAGIC = b"E5S1"
_SPARSE_TENSOR = "emb.word"  # the vocabulary table: the last sparsely read part of the file


def trim_heap() -> None:
    """Give the C heap's free pages back to the system (glibc; elsewhere a no-op)."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):  # not glibc
        return
    trim(0)


def sparse_regions(path: str | Path) -> list[tuple[int, int]]:
    """(offset, length) of the parts of an e5 model file that calls read sparsely or never:
    the tables copied at load (before the pieces) and the vocabulary table. The pieces
    themselves stay: tokenizing probes them all over. Empty when the file is not in the
    expected layout."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(8 << 20)  # header, tokenizer and tensor directory fit
        if data[:4] != _MAGIC:
            return []
        at = 8 + 9 * 4  # magic, version; H NL NH FF VOC MAXP TVS eps qk
        pieces = struct.unpack_from("<i", data, at)[0]
        at += 5 * 4
        blob = struct.unpack_from("<Q", data, at)[0]
        at += 8 + (pieces + 1) * 4 + pieces * 4
        copied = (0, at)  # header, piece offsets and scores: copied at load
        at += blob
        _norms, norm_bytes = struct.unpack_from("<iI", data, at)
        at += 8 + norm_bytes
        entries = struct.unpack_from("<i", data, at)[0]
        at += 4
        for _ in range(entries):
            name_length = struct.unpack_from("<H", data, at)[0]
            name = data[at + 2:at + 2 + name_length].decode("ascii", "replace")
            at += 2 + name_length + 1
            _count, offset, size = struct.unpack_from("<IQQ", data, at)
            at += 20
            if name == _SPARSE_TENSOR:
                return [copied, (int(offset), int(size))]
    except (OSError, struct.error):
        pass
    return []


def mapped_at(path: str | Path, maps: str = "/proc/self/maps") -> list[tuple[int, int]]:
    """(start address, length) of each mapping of ``path`` from its first byte."""
    target = str(Path(path).resolve())
    found = []
    try:
        lines = Path(maps).read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and fields[5] == target and int(fields[2], 16) == 0:
            start, end = (int(x, 16) for x in fields[0].split("-"))
            found.append((start, end - start))
    return found


def release_regions(path: str | Path, regions: list[tuple[int, int]]) -> int:
    """Drop this process's resident pages of ``regions`` (offset, length) of every mapping of
    ``path`` (read-only file pages: read again from the page cache when needed). Returns the
    bytes advised."""
    if not regions:
        return 0
    try:
        madvise = ctypes.CDLL(None, use_errno=True).madvise
    except (AttributeError, OSError):
        return 0
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    page = mmap.PAGESIZE
    advised = 0
    for start, length in mapped_at(path):
        for offset, size in regions:
            first = -(-offset // page) * page  # whole pages inside the region only
            last = min(offset + size, length) // page * page
            if last > first and madvise(start + first, last - first, MADV_DONTNEED) == 0:
                advised += last - first
    return advised


class IdleRelease:
    """Runs ``release`` (on ``run_off_loop``) once no work was ``touch``-ed for
    ``idle_seconds`` after some work; at most once per burst."""

    def __init__(self, release: Callable[[], object],
                 run_off_loop: Callable[[Callable[[], object]], object],
                 idle_seconds: float | None = None) -> None:
        self._release = release
        self._run = run_off_loop
        self._idle = IDLE_SECONDS if idle_seconds is None else idle_seconds
        self._last = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self.releases = 0

    def touch(self) -> None:
        """Work just ended; call on the event loop."""
        self._last = time.monotonic()
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self._idle, self._check)

    def _check(self) -> None:
        quiet = time.monotonic() - self._last
        if quiet < self._idle:  # more work came meanwhile: wait for the rest of the pause
            self._timer = asyncio.get_running_loop().call_later(self._idle - quiet,
                                                                self._check)
            return
        self._timer = None
        self.releases += 1
        self._run(self._release)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
