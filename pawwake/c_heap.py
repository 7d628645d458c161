"""The C heap's policy for large blocks: allocate them with mmap, always.

glibc raises its mmap threshold each time a large mmapped block is freed (up to 32 MiB), so
after one big request the next ones are carved from the heap, whose freed pages it keeps:
six 31 MB chats took a gateway from 71 to 734 MB resident, for good. With a fixed threshold
every block over 1 MiB is its own mapping and goes back to the system when freed (the same
six chats: 301 MB after, bench/large_bodies.py), for a syscall per block, which is nothing
beside a megabyte of work. Elsewhere than glibc this does nothing.
"""

from __future__ import annotations

import ctypes
import logging

log = logging.getLogger(__name__)

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
LARGE_BLOCK_BYTES = 1 << 20


def map_large_blocks() -> bool:
    """Fix glibc's mmap and trim thresholds at 1 MiB; False where there is no glibc."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    done = bool(mallopt(M_MMAP_THRESHOLD, LARGE_BLOCK_BYTES)) and \
        bool(mallopt(M_TRIM_THRESHOLD, LARGE_BLOCK_BYTES))
    if not done:
        log.debug("mallopt refused the large-block thresholds")
    return done
