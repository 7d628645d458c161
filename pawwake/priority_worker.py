"""One worker thread with a priority queue: a chat's work goes ahead of background work.

Heavy calls (the local embedding model, jieba) run here instead of on the event loop. A plain
executor serves in arrival order, so a chat's query waited behind every background item queued
before it; here it waits at most for the one item already running. Background callers submit
bounded items one at a time so that wait stays short.

A worker may run at a lower scheduling priority than the rest of the process (``nice``, Linux:
a per-thread niceness set on the worker's own thread): the model's lanes then take the CPU the
event loop and PostgreSQL leave, instead of competing with them for it.

The thread is a daemon and ``close`` does not join it: a model call that is running when the
process stops is abandoned, not waited for (it holds nothing that must be flushed), so shutdown
never waits on it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import logging
import os
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

CHAT = 0  # work a chat request waits for
BACKGROUND = 1  # jobs, backfills, writes after the reply

_STOP = object()


class PriorityWorker:
    """Runs submitted calls on one daemon thread, lowest priority number first, then FIFO."""

    def __init__(self, name: str, *, nice: int = 0) -> None:
        self._name = name
        self._nice = max(0, int(nice))
        self.native_id: int | None = None  # the thread's id once it runs (for its priority)
        self._queue: queue.PriorityQueue[tuple[int, int, Any]] = queue.PriorityQueue()
        self._order = itertools.count()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False

    async def run(self, priority: int, function: Callable[..., T], *args: Any) -> T:
        """Run ``function(*args)`` on the worker thread; cancelling the caller drops the call
        when it has not started yet (a started call runs to its end, its result unused)."""
        future = self.submit(priority, function, *args)
        return await asyncio.wrap_future(future)

    def submit(self, priority: int, function: Callable[..., T], *args: Any
               ) -> concurrent.futures.Future[T]:
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        if self._closed:
            future.set_exception(RuntimeError(f"{self._name} worker is closed"))
            return future
        self._ensure_thread()
        self._queue.put((priority, next(self._order), (function, args, future)))
        return future

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def pending(self) -> int:
        """Calls queued and not yet started (approximate)."""
        return self._queue.qsize()

    def close(self) -> None:
        """Stop taking work and cancel what has not started; never waits for a running call."""
        self._closed = True
        while True:
            try:
                _priority, _order, item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not _STOP:
                item[2].cancel()
        self._queue.put((-1, -1, _STOP))

    def _ensure_thread(self) -> None:
        if self._thread is not None:
            return
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name=self._name,
                                                daemon=True)
                self._thread.start()

    def _serve(self) -> None:
        self.native_id = threading.get_native_id()
        if self._nice:
            lower_priority(self._nice)
        while True:
            _priority, _order, item = self._queue.get()
            if item is _STOP:
                return
            function, args, future = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = function(*args)
            except BaseException as exc:  # handed to the awaiting coroutine
                future.set_exception(exc)
            else:
                future.set_result(result)


def lower_priority(steps: int) -> None:
    """Make the calling thread ``steps`` nicer than it is (at most 19). On Linux a thread's
    niceness is its own: ``setpriority`` with the thread id touches no other thread. Raising
    niceness needs no privilege; where it is not supported the thread keeps its priority."""
    setpriority = getattr(os, "setpriority", None)
    if setpriority is None:
        return
    try:
        tid = threading.get_native_id()
        setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + steps))
    except OSError as exc:
        log.debug("could not lower the priority of thread %s: %s",
                  threading.current_thread().name, exc)
