"""The bundled local model on its lanes: chat queries on the query lanes (batched,
``query_batch``), background passages and jobs' queries on the background lane, one engine
instance shared by all (``local_engine``), and its idle memory given back after a burst
(``engine_memory``).

Passages are sent in calls of at most ``LOCAL_CALL_CHARS`` characters, so the background lane
yields often and stops quickly.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from pawwake.llm.embeddings.engine_memory import (
    IdleRelease,
    release_regions,
    sparse_regions,
    trim_heap,
)
from pawwake.llm.embeddings.local_engine import (
    BACKGROUND_LANE_NICE,
    QUERY_LANE_NICE,
    SharedEngine,
    model_file,
    query_lanes,
)
from pawwake.llm.embeddings.provenance import normalise_rows
from pawwake.llm.embeddings.query_batch import QueryBatcher, QueryRequest, QueryTiming
from pawwake.priority_worker import BACKGROUND, CHAT, PriorityWorker

log = logging.getLogger(__name__)

LOCAL_CALL_CHARS = 1024  # characters per background call to the local engine (< 1 s here)


def local_calls(texts: Sequence[str]) -> list[list[str]]:
    """Consecutive texts grouped into calls of about LOCAL_CALL_CHARS (a long text alone)."""
    calls: list[list[str]] = []
    size = 0
    for text in texts:
        if not calls or size + len(text) > LOCAL_CALL_CHARS:
            calls.append([])
            size = 0
        calls[-1].append(text)
        size += len(text)
    return calls


class LocalModel:
    """One per process: the lanes and the shared engine, loaded on first use."""

    def __init__(self) -> None:
        # background passages (one call at a time), below the query lanes' priority
        self.worker = PriorityWorker("embed", nice=BACKGROUND_LANE_NICE)
        lanes, self._lane_threads = query_lanes()
        self.engine = SharedEngine()  # one model for the query lanes and the background lane
        self.batcher = QueryBatcher(
            [PriorityWorker(f"embed-query-{n}", nice=QUERY_LANE_NICE) for n in range(lanes)],
            lambda _lane: self.engine.on_this_thread(self._lane_threads), _local_queries)
        # After a burst, the model's sparsely read pages and the heap's free pages go back.
        self.idle_release = IdleRelease(self._release_memory, self._off_loop)
        self._sparse: list[tuple[int, int]] | None = None
        self.model: Any = None  # the instance, once the background lane has loaded it
        self._loading = asyncio.Lock()

    def close(self) -> None:
        """Drop queued work; a model call already running is not waited for (its thread is
        a daemon), so shutdown never waits on the model."""
        self.idle_release.close()
        self.worker.close()
        for lane in self.batcher.lanes:
            lane.close()

    def submit_query(self, text: str) -> QueryRequest:
        """A chat query, queued on the query lanes now (see ``QueryBatcher``)."""
        return self.batcher.submit(text)

    async def query(self, request: QueryRequest) -> tuple[np.ndarray, QueryTiming]:
        """The vector of a query queued with ``submit_query``."""
        try:
            return await request.future
        finally:
            self.idle_release.touch()

    async def background_query(self, text: str) -> tuple[np.ndarray, QueryTiming]:
        """A job's query on the background lane, behind every chat's."""
        model = await self._model()
        queued = time.perf_counter()
        try:
            vector, started, ended = await self.worker.run(BACKGROUND, _timed_query, model,
                                                           text)
        finally:
            self.idle_release.touch()
        return vector, QueryTiming((started - queued) * 1000.0, (ended - started) * 1000.0)

    async def passages(self, texts: list[str]) -> np.ndarray:
        """Stored texts' vectors on the background lane, in calls of ``local_calls``."""
        model = await self._model()
        parts = []
        for call in local_calls(texts):
            try:
                parts.append(normalise_rows(await self.worker.run(BACKGROUND, model.passage,
                                                                  call)))
            finally:
                self.idle_release.touch()
        return np.vstack(parts)

    async def _model(self) -> Any:
        """The engine on the background lane (the shared instance; its thread's team size set
        on that thread the first time)."""
        if self.model is None:
            async with self._loading:
                if self.model is None:
                    self.model = await self.worker.run(CHAT, self.engine.on_this_thread, 1)
        return self.model

    def _release_memory(self) -> None:
        """On the background lane: drop the model's sparsely read pages, trim the heap."""
        if self._sparse is None:
            self._sparse = sparse_regions(model_file())
        released = release_regions(model_file(), self._sparse)
        trim_heap()
        log.debug("idle engine: %d MB of model pages and the heap's free pages released",
                  released >> 20)

    def _off_loop(self, release: Any) -> None:
        if not self.worker.closed:
            self.worker.submit(BACKGROUND, release).add_done_callback(_release_failed)


def _release_failed(done: Any) -> None:
    if not done.cancelled() and done.exception() is not None:
        log.warning("giving idle memory back failed: %s", done.exception())


def _local_queries(model: Any, texts: list[str]) -> np.ndarray:
    return normalise_rows(model.query(texts))


def _timed_query(model: Any, text: str) -> tuple[np.ndarray, float, float]:
    """One query on the background lane, with when its model call started and ended."""
    started = time.perf_counter()
    row = _local_queries(model, [text])[0]
    return row, started, time.perf_counter()
