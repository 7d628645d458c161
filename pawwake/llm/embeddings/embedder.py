"""The embedder: one per process, the way every vector is asked for (an OpenAI-compatible API
or the bundled local e5 model, chosen per setting), with the query cache.

Nothing here may hold a chat up. A chat's local query goes to the query lanes, never behind a
background call (it waited a whole 32-text batch before: 45 s for one long memory); passages
and jobs' queries go to the background lane (``local``). A query has a deadline
(``QUERY_EMBEDDING_TIMEOUT``): past it the caller gets ``QueryEmbeddingTimeout`` and searches
by keywords. A query still queued then is dropped (under load, queued late queries would only
make the next ones late too); one already running, or an API request in flight, finishes and
is cached for the next time the same query comes. Better still, a local query that would wait
longer than ``QUERY_EMBEDDING_MAX_WAIT`` behind the others (``QueryBatcher.predicted_wait_ms``)
is not queued at all: the caller gets ``QueryEmbeddingShed`` at once and searches by keywords,
instead of waiting out the deadline first. A query on an idle lane is never shed, nor one with
at most ``ALWAYS_QUEUED_BEHIND`` text ahead of it per lane: on a slow host (a tenth of a CPU,
where one query takes longer than the budget) two chats per lane at once still get their
vectors, and no chat waits longer than about one other text's compute beyond the budget.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Coroutine, Sequence
from functools import partial
from typing import Any, TypeVar

import aiohttp
import numpy as np

from pawwake.llm.embeddings.api import API_BATCH, EmbeddingApi, UsageRecorder
from pawwake.llm.embeddings.local import LocalModel
from pawwake.llm.embeddings.local_engine import LOCAL_DIM, LOCAL_MODEL
from pawwake.llm.embeddings.provenance import (
    EmbeddingError,
    Provenance,
    QueryEmbeddingShed,
    QueryEmbeddingTimeout,
    passage_text,
    provider_for,
)
from pawwake.llm.embeddings.query_batch import QueryRequest, QueryTiming
from pawwake.priority_worker import BACKGROUND, CHAT
from pawwake.settings import Settings

log = logging.getLogger(__name__)
T = TypeVar("T")

QUERY_CACHE_SIZE = 256
QUERY_DEADLINE = 10.0  # seconds an API query request may take (a late answer is still cached)
# Texts per lane a chat query may always wait behind. Under load the model's time per text
# grows (its lanes take the CPU the event loop and PostgreSQL leave), and so did this floor:
# at 20 streams on two cores, with 2 the queued queries waited 53 ms and took 258 ms, and the
# gateway served 0.48-0.50x direct; with 1 it served 0.58-0.60x at the same vectors per second
# (16-17: the model's leftover CPU), only shared over more chats (bench/memory_injection.py).
ALWAYS_QUEUED_BEHIND = 1
SHED_LOG_SECONDS = 60.0  # queries searched by keywords under load are logged as a count
# A job's query waits behind the passages already queued on the background lane (each call
# bounded by LOCAL_CALL_CHARS), not for a chat's deadline.
BACKGROUND_QUERY_DEADLINE = 10.0


class Embedder:
    """One per process: the local model on its lanes, the API and its quirks, a query cache."""

    def __init__(self, http: aiohttp.ClientSession | None,
                 usage: UsageRecorder | None = None) -> None:
        self.api = EmbeddingApi(http, usage)
        self.local = LocalModel()
        self._running: dict[tuple[Provenance, str], QueryRequest] = {}
        self._queries: OrderedDict[tuple[Provenance, str], np.ndarray] = OrderedDict()
        # Queries being embedded, by (provenance, text) and lane (CHAT or BACKGROUND).
        self._pending: dict[tuple[tuple[Provenance, str], int],
                            asyncio.Task[tuple[np.ndarray, QueryTiming | None]]] = {}
        self.shed = 0  # chat queries not queued under load (searched by keywords)
        self._shed_logged = (0.0, 0)  # when the count was last logged, and the count then

    def use_http(self, http: aiohttp.ClientSession) -> None:
        """The app's HTTP client, once it is open (embedding API calls go through it)."""
        self.api.http = http

    async def close(self) -> None:
        """Drop queued work and late queries; a model call already running is not waited
        for, so shutdown never waits on the model."""
        self.local.close()
        pending = list(self._pending.values())
        for task in pending:
            task.cancel()
        for task in pending:
            with contextlib.suppress(asyncio.CancelledError, EmbeddingError):
                await task

    # -- provenance ---------------------------------------------------------------------------

    def configured_provenance(self, settings: Settings) -> Provenance:
        """The provenance new vectors will have, as far as known without calling the API."""
        if provider_for(settings) == "local":
            return Provenance("local", LOCAL_MODEL, LOCAL_DIM)
        return self.api.provenance(settings)

    async def provenance(self, settings: Settings) -> Provenance:
        """The provenance new vectors will have; probes the API once if its answer is unknown
        (a server may ignore ``dimensions`` and answer with its own size)."""
        if provider_for(settings) == "api":
            await self.api.probe(settings)
        return self.configured_provenance(settings)

    # -- embedding ----------------------------------------------------------------------------

    async def embed_query(self, settings: Settings, text: str, *,
                          timings: dict[str, float] | None = None, priority: int = CHAT
                          ) -> tuple[np.ndarray, Provenance]:
        """A search query's vector (e5 ``query:`` role), cached per provenance (provider,
        model, dimension) in a bounded LRU. Concurrent local queries share model calls
        (``QueryBatcher``). ``timings`` receives ``embed_wait``, ``embed_compute`` (ms),
        ``embed_batch`` and ``embed_cached`` when given.

        ``priority=BACKGROUND`` (a job's search) embeds a local query on the background lane,
        behind every chat, and waits up to ``BACKGROUND_QUERY_DEADLINE``; it still uses and
        fills the cache, and joins the same query already being embedded for a chat.

        Raises ``QueryEmbeddingShed`` at once, queueing nothing, when a chat's local query
        would wait longer than ``QUERY_EMBEDDING_MAX_WAIT`` behind others (``timings`` gets
        ``embed_shed``); never while a lane is idle, nor for a query already cached or being
        embedded.

        Raises ``QueryEmbeddingTimeout`` after ``QUERY_EMBEDDING_TIMEOUT`` seconds; the
        embedding itself goes on and its vector is cached (the same query asked again, by a
        retry or the next search, then answers at once)."""
        return await self.start_query(settings, text, timings=timings, priority=priority)

    def start_query(self, settings: Settings, text: str, *,
                    timings: dict[str, float] | None = None, priority: int = CHAT
                    ) -> Coroutine[Any, Any, tuple[np.ndarray, Provenance]]:
        """``embed_query`` started before this returns: a local chat query is already with its
        lane, so whatever the caller does next (cutting keywords, a query) runs beside the
        model instead of before it. Await the result (see ``embed_query``).
        ``QueryEmbeddingShed`` is raised here, at once, so the caller knows no vector comes."""
        provenance = self.configured_provenance(settings)
        key = (provenance, text)
        cached = self._queries.get(key)
        if cached is not None:
            self._queries.move_to_end(key)
            if timings is not None:
                timings.update(embed_wait=0.0, embed_compute=0.0, embed_batch=0,
                               embed_cached=1)
            return _given((cached, provenance))
        background = priority != CHAT and provenance.provider == "local"
        lane = BACKGROUND if background else CHAT
        # A chat never waits on the background lane; a job may share a chat's call.
        task = self._pending.get((key, CHAT)) or (
            self._pending.get((key, BACKGROUND)) if background else None)
        if task is None:
            request = None
            if lane == CHAT and provenance.provider == "local":
                self._shed_if_busy(settings, timings)
                # Queued now, not when the task first runs: the lane may start before the
                # caller's next step, and the next caller's prediction counts it, even within
                # the same burst.
                request = self._running[key] = self.local.submit_query(text)
                if len(self._running) == 1:
                    # Alone: hand the interpreter lock over so the lane's thread starts the
                    # model now, not whenever the loop next waits (0.3-0.6 ms later here).
                    time.sleep(0)
            task = asyncio.create_task(self._query_vector(settings, text, key, lane, request),
                                       name="query-embedding")
            self._pending[key, lane] = task
            task.add_done_callback(partial(_forget, self._pending, (key, lane)))
            if request is not None:
                task.add_done_callback(partial(self._request_over, key, request))
        return self._awaited_query(settings, key, task, background, timings)

    async def _awaited_query(self, settings: Settings, key: tuple[Provenance, str],
                             task: asyncio.Task[tuple[np.ndarray, QueryTiming | None]],
                             background: bool, timings: dict[str, float] | None
                             ) -> tuple[np.ndarray, Provenance]:
        """One caller's wait for a query embedding, with its deadline."""
        seconds = float(settings.QUERY_EMBEDDING_TIMEOUT)
        if background:
            seconds = max(seconds, BACKGROUND_QUERY_DEADLINE)
        started = time.perf_counter()
        try:
            vector, timing = await asyncio.wait_for(asyncio.shield(task), seconds)
        except TimeoutError:
            if timings is not None:
                timings.update(embed_timeout=1)
            if key[0].provider == "local" and not background:
                running = self._running.get(key)
                if running is None or not running.started:  # not started: drop it
                    task.cancel()
            raise QueryEmbeddingTimeout(seconds) from None
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if task.cancelled() and current is not None and not current.cancelling():
                # the call this caller joined was dropped at another caller's deadline
                raise QueryEmbeddingTimeout(seconds) from None
            raise
        if timings is not None:
            if timing is None:  # an API call: all of it counts as compute
                timing = QueryTiming(0.0, (time.perf_counter() - started) * 1000.0)
            timings.update(embed_wait=timing.wait_ms, embed_compute=timing.compute_ms,
                           embed_batch=timing.batch, embed_cached=0)
        return vector, self.configured_provenance(settings)

    def _shed_if_busy(self, settings: Settings, timings: dict[str, float] | None) -> None:
        """Raise ``QueryEmbeddingShed`` when a new query would wait past the budget."""
        budget = float(settings.QUERY_EMBEDDING_MAX_WAIT)
        predicted = self.local.batcher.predicted_wait_ms()
        allowed = max(budget * 1000.0, ALWAYS_QUEUED_BEHIND * (self.local.batcher.ms_per_text
                                                                or 0.0))
        if budget <= 0 or predicted <= allowed:
            return
        self.shed += 1
        if timings is not None:
            timings.update(embed_shed=1, embed_predicted_wait=predicted)
        now = time.monotonic()
        since, count = self._shed_logged
        if now - since >= SHED_LOG_SECONDS:
            log.info("the embedding model is busy: %d chat queries searched by keywords only "
                     "(QUERY_EMBEDDING_MAX_WAIT %g s)", self.shed - count, budget)
            self._shed_logged = (now, self.shed)
        raise QueryEmbeddingShed(predicted, budget)

    def _request_over(self, key: tuple[Provenance, str], request: QueryRequest,
                      _task: asyncio.Task[Any]) -> None:
        """A query's task ended (even cancelled before it ran): its request leaves the batch."""
        request.future.cancel()  # nothing when it already has its vector
        if self._running.get(key) is request:
            del self._running[key]

    async def _query_vector(self, settings: Settings, text: str,
                            key: tuple[Provenance, str], lane: int = CHAT,
                            request: QueryRequest | None = None
                            ) -> tuple[np.ndarray, QueryTiming | None]:
        """``request``: the local chat query already queued in the batcher."""
        timing: QueryTiming | None = None
        if key[0].provider == "local" and lane == BACKGROUND:
            vector, timing = await self.local.background_query(text)
        elif key[0].provider == "local":
            if request is None:
                request = self._running[key] = self.local.submit_query(text)
            vector, timing = await self.local.query(request)
        else:
            vector = (await self.api.embed(settings, [text], deadline=QUERY_DEADLINE))[0]
        provenance = self.configured_provenance(settings)  # the API may have taught us its dim
        self._queries[(provenance, text)] = vector
        while len(self._queries) > QUERY_CACHE_SIZE:
            self._queries.popitem(last=False)
        return vector, timing

    async def embed_passages(self, settings: Settings, texts: Sequence[str]
                             ) -> tuple[np.ndarray, Provenance]:
        """Vectors of stored texts (e5 ``passage:`` role), batched; one row per text. Each
        text is embedded from its bounded part (``passage_text``); local calls are small and
        queued behind any chat's query."""
        provider = provider_for(settings)
        kept = [passage_text(text, provider) for text in texts]
        parts = []
        if provider == "local":
            if kept:
                parts.append(await self.local.passages(kept))
        else:
            for start in range(0, len(kept), API_BATCH):
                parts.append(await self.api.embed(settings, kept[start:start + API_BATCH]))
        provenance = self.configured_provenance(settings)
        if not parts:
            return np.zeros((0, provenance.dim), dtype=np.float32), provenance
        return np.vstack(parts), provenance


def _forget(pending: dict[Any, Any], key: Any, task: asyncio.Task[Any]) -> None:
    """Done callback of a query embedding: drop it from the pending table and mark its
    failure as seen (a caller that gave up at the deadline no longer awaits it)."""
    if pending.get(key) is task:
        del pending[key]
    if not task.cancelled() and task.exception() is not None:
        log.debug("a late query embedding failed: %s", task.exception())


async def _given(value: T) -> T:
    return value
