"""Text embeddings: an OpenAI-compatible API or the bundled local e5 model, chosen per setting.

Vectors come back L2-normalised float32 rows, tagged with their provenance (provider, model,
dimension) so stored vectors are never compared with vectors from another model.

Nothing here may hold a chat up. The local model runs on lanes, threads sharing one engine
instance (``SharedEngine``): chat queries on the query lanes, background passages and the
queries of jobs' searches on the background lane, so a query never waits behind a background
call (it waited a whole 32-text batch before: 45 s for one long memory). Passages are bounded
(``passage_text``) and sent in calls of at most ``LOCAL_CALL_CHARS`` characters, so the
background lane yields often and stops quickly. After a pause in the work the engine's idle
memory goes back (``engine_memory``). A query has a deadline (``QUERY_EMBEDDING_TIMEOUT``):
past it the caller gets ``QueryEmbeddingTimeout`` and searches by keywords. A query still
queued then is dropped (under load, queued late queries would only make the next ones late
too); one already running, or an API request in flight, finishes and is cached for the next
time the same query comes. Better still, a local query that would wait longer than
``QUERY_EMBEDDING_MAX_WAIT`` behind the others (``QueryBatcher.predicted_wait_ms``) is not
queued at all: the caller gets ``QueryEmbeddingShed`` at once and searches by keywords, instead
of waiting out the deadline first. A query on an idle lane is never shed, nor one with at most
``ALWAYS_QUEUED_BEHIND`` texts ahead of it per lane: on a slow host (a tenth of a CPU, where one
query takes longer than the budget) two or three chats at once still get their vectors.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from typing import Any, TypeVar

import aiohttp
import numpy as np

from pawwake.llm.engine_memory import IdleRelease, release_regions, sparse_regions, trim_heap
from pawwake.llm.local_engine import (
    BACKGROUND_LANE_NICE,
    LOCAL_DIM,
    LOCAL_MODEL,
    QUERY_LANE_NICE,
    SharedEngine,
    model_file,
    query_lanes,
)
from pawwake.llm.query_batch import QueryBatcher, QueryRequest, QueryTiming
from pawwake.llm.sse import TokenUsage
from pawwake.priority_worker import BACKGROUND, CHAT, PriorityWorker
from pawwake.settings import Settings
from pawwake.text.tokens import bounded

log = logging.getLogger(__name__)
T = TypeVar("T")

# Noise floor of a semantic candidate (raw cosine); admission itself is by rank within the
# query's neighbourhood (search.fusion). e5 puts unrelated texts at 0.7-0.86 and a paraphrase
# can sit at 0.80; OpenAI-style models spread lower. Pinned by a test.
DEFAULT_THRESHOLDS: Mapping[str, float] = {"api": 0.3, "local": 0.78}
API_BATCH = 64
QUERY_CACHE_SIZE = 256
QUERY_DEADLINE = 10.0  # seconds an API query request may take (a late answer is still cached)
ALWAYS_QUEUED_BEHIND = 2  # texts per lane a chat query may always wait behind
SHED_LOG_SECONDS = 60.0  # queries searched by keywords under load are logged as a count
# A job's query waits behind the passages already queued on the background lane (each call
# bounded by LOCAL_CALL_CHARS), not for a chat's deadline.
BACKGROUND_QUERY_DEADLINE = 10.0
# A stored text is embedded from a bounded part: e5 reads 512 tokens per window and the local
# engine averages every window of a long text (a 50k-character memory took about a minute);
# an API rejects inputs past its token limit. Head and tail, like the keyword index.
LOCAL_PASSAGE_HEAD, LOCAL_PASSAGE_TAIL = 768, 256
API_PASSAGE_HEAD, API_PASSAGE_TAIL = 3000, 1000
LOCAL_CALL_CHARS = 1024  # characters per background call to the local engine (< 1 s here)
PROBE_DEADLINE = 10.0
PROBE_RETRY_SECONDS = 30.0
_NO_DIMENSIONS_STATUSES = (400, 422)


@dataclass(frozen=True)
class Provenance:
    """Where a vector came from; vectors of different provenance are not comparable."""

    provider: str
    model: str
    dim: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class EmbeddingError(RuntimeError):
    """The embedding provider failed; ``status`` is the HTTP status when there was one."""

    def __init__(self, message: str, status: int | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after

    @property
    def rate_limited(self) -> bool:
        return self.status == 429


class QueryEmbeddingTimeout(EmbeddingError):
    """A query's vector did not come within ``QUERY_EMBEDDING_TIMEOUT``; search by keywords."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"query embedding took longer than {seconds:g} s")
        self.seconds = seconds


class QueryEmbeddingShed(EmbeddingError):
    """Under load a query would have waited ``predicted_ms`` for the local model, past
    ``QUERY_EMBEDDING_MAX_WAIT``: it was not queued; search by keywords at once."""

    def __init__(self, predicted_ms: float, budget: float) -> None:
        super().__init__(f"this query's vector would have waited about {predicted_ms:.0f} ms"
                         f" behind others (QUERY_EMBEDDING_MAX_WAIT {budget:g} s)")
        self.predicted_ms = predicted_ms


def passage_text(text: str, provider: str) -> str:
    """The bounded part of a stored text that is embedded: its head and tail when long."""
    if provider == "local":
        head, tail = LOCAL_PASSAGE_HEAD, LOCAL_PASSAGE_TAIL
    else:
        head, tail = API_PASSAGE_HEAD, API_PASSAGE_TAIL
    return bounded(text, head, tail)


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


def provider_for(settings: Settings) -> str:
    """``auto`` means the API when a key is configured, else the local model."""
    choice = settings.EMBEDDING_PROVIDER
    if choice == "auto":
        return "api" if settings.EMBEDDING_API_KEY else "local"
    return str(choice)


def semantic_threshold(settings: Settings, provider: str | None = None) -> float:
    """The configured threshold, else the calibrated default of the provider in use."""
    configured = settings.MEMORY_SEMANTIC_THRESHOLD
    if configured is not None:
        return float(configured)
    return DEFAULT_THRESHOLDS[provider or provider_for(settings)]


def normalise_rows(matrix: np.ndarray) -> np.ndarray:
    """Unit-length float32 rows (zero rows stay zero)."""
    matrix = np.asarray(matrix, dtype=np.float32)
    if matrix.ndim == 1:
        matrix = matrix[None, :]
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    rows: np.ndarray = matrix / norms
    return rows


# What the embedder's owner does with the tokens an embedding API call reports (the model
# and the counts): the embedder embeds, its owner books (``memory/resources.py``).
UsageRecorder = Callable[[str, TokenUsage], Awaitable[None]]


class Embedder:
    """One per process: the lazily loaded local model, API quirks learned, a query cache."""

    def __init__(self, http: aiohttp.ClientSession | None,
                 usage: UsageRecorder | None = None) -> None:
        self._http = http
        self._usage = usage
        # background passages (one call at a time), below the query lanes' priority
        self.worker = PriorityWorker("embed", nice=BACKGROUND_LANE_NICE)
        lanes, self._lane_threads = query_lanes()
        self.engine = SharedEngine()  # one model for the query lanes and the background lane
        self.batcher = QueryBatcher(
            [PriorityWorker(f"embed-query-{n}", nice=QUERY_LANE_NICE) for n in range(lanes)],
            lambda _lane: self.engine.on_this_thread(self._lane_threads), _local_queries)
        self.query_worker = self.batcher.lanes[0]  # chat queries (the first lane)
        # After a burst, the model's sparsely read pages and the heap's free pages go back.
        self.idle_release = IdleRelease(self._release_memory, self._off_loop)
        self._sparse: list[tuple[int, int]] | None = None
        self._local: Any = None
        self._local_lock = asyncio.Lock()
        self._running: dict[tuple[Provenance, str], QueryRequest] = {}
        self._without_dimensions: set[tuple[str, str]] = set()
        self._learned_dim: dict[tuple[str, str, int], int] = {}
        self._probe_failures: dict[tuple[str, str, int], tuple[float, EmbeddingError]] = {}
        self._queries: OrderedDict[tuple[Provenance, str], np.ndarray] = OrderedDict()
        # Queries being embedded, by (provenance, text) and lane (CHAT or BACKGROUND).
        self._pending: dict[tuple[tuple[Provenance, str], int],
                            asyncio.Task[tuple[np.ndarray, QueryTiming | None]]] = {}
        self.shed = 0  # chat queries not queued under load (searched by keywords)
        self._shed_logged = (0.0, 0)  # when the count was last logged, and the count then

    def use_http(self, http: aiohttp.ClientSession) -> None:
        """The app's HTTP client, once it is open (embedding API calls go through it)."""
        self._http = http

    async def close(self) -> None:
        """Drop queued work and late queries; a model call already running is not waited
        for (its thread is a daemon), so shutdown never waits on the model."""
        self.idle_release.close()
        self.worker.close()
        for lane in self.batcher.lanes:
            lane.close()
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
        model, dim = settings.EMBEDDING_MODEL, int(settings.EMBEDDING_DIM)
        learned = self._learned_dim.get((_api_base(settings), model, dim), dim)
        return Provenance("api", model, learned)

    async def provenance(self, settings: Settings) -> Provenance:
        """The provenance new vectors will have; probes the API once if its answer is unknown
        (a server may ignore ``dimensions`` and answer with its own size)."""
        if provider_for(settings) == "api":
            key = (_api_base(settings), settings.EMBEDDING_MODEL,
                   int(settings.EMBEDDING_DIM))
            if key not in self._learned_dim:
                failed = self._probe_failures.get(key)
                if failed is not None and time.monotonic() - failed[0] < PROBE_RETRY_SECONDS:
                    raise failed[1]  # a status page polling every second must not wait
                try:
                    await self._api_embed(settings, ["ping"], deadline=PROBE_DEADLINE)
                except EmbeddingError as exc:
                    self._probe_failures[key] = (time.monotonic(), exc)
                    raise
                self._probe_failures.pop(key, None)
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
                request = self._running[key] = self.batcher.submit(text)
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
        predicted = self.batcher.predicted_wait_ms()
        allowed = max(budget * 1000.0, ALWAYS_QUEUED_BEHIND * (self.batcher.ms_per_text or 0.0))
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
            model = await self._local_model()
            queued = time.perf_counter()
            try:
                vector, started, ended = await self.worker.run(BACKGROUND, _timed_query, model,
                                                               text)
            finally:
                self.idle_release.touch()
            timing = QueryTiming((started - queued) * 1000.0, (ended - started) * 1000.0)
        elif key[0].provider == "local":
            if request is None:
                request = self._running[key] = self.batcher.submit(text)
            try:
                vector, timing = await request.future
            finally:
                self.idle_release.touch()
        else:
            vector = (await self._api_embed(settings, [text], deadline=QUERY_DEADLINE))[0]
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
            for call in local_calls(kept):
                parts.append(await self._local_passages(call))
        else:
            for start in range(0, len(kept), API_BATCH):
                parts.append(await self._api_embed(settings, kept[start:start + API_BATCH]))
        provenance = self.configured_provenance(settings)
        if not parts:
            return np.zeros((0, provenance.dim), dtype=np.float32), provenance
        return np.vstack(parts), provenance

    # -- local model --------------------------------------------------------------------------

    async def _local_passages(self, texts: list[str]) -> np.ndarray:
        model = await self._local_model()
        try:
            return normalise_rows(await self.worker.run(BACKGROUND, model.passage, texts))
        finally:
            self.idle_release.touch()

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

    async def _local_model(self) -> Any:
        """The engine on the background lane (the shared instance; its thread's team size set
        on that thread the first time)."""
        if self._local is None:
            async with self._local_lock:
                if self._local is None:
                    self._local = await self.worker.run(CHAT, self.engine.on_this_thread, 1)
        return self._local

    # -- OpenAI-compatible API ----------------------------------------------------------------

    async def _api_embed(self, settings: Settings, texts: list[str], *,
                         deadline: float = 60.0) -> np.ndarray:
        if self._http is None:
            raise EmbeddingError("no HTTP client for the embedding API")
        base, model = _api_base(settings), settings.EMBEDDING_MODEL
        dim = int(settings.EMBEDDING_DIM)
        body: dict[str, Any] = {"model": model, "input": texts, "encoding_format": "float"}
        send_dimensions = (base, model) not in self._without_dimensions
        if send_dimensions:
            body["dimensions"] = dim
        status, payload = await self._post(settings, body, deadline)
        if status in _NO_DIMENSIONS_STATUSES and send_dimensions:
            log.info("embedding API rejected 'dimensions' (HTTP %s); retrying without it",
                     status)
            body.pop("dimensions")
            status, payload = await self._post(settings, body, deadline)
            if status == 200:
                self._without_dimensions.add((base, model))
        if status != 200:
            raise _api_failure(status, payload, settings.EMBEDDING_API_KEY)
        matrix = _vectors_from(payload, len(texts))
        self._learned_dim[(base, model, dim)] = int(matrix.shape[1])
        usage = TokenUsage.from_openai(payload.get("usage") if isinstance(payload, dict) else None)
        if usage is not None and self._usage is not None:
            await self._usage(model, usage)
        return normalise_rows(matrix)

    async def _post(self, settings: Settings, body: dict[str, Any], deadline: float
                    ) -> tuple[int, Any]:
        assert self._http is not None
        headers = {"Accept-Encoding": "identity", "Content-Type": "application/json"}
        if settings.EMBEDDING_API_KEY:
            headers["Authorization"] = f"Bearer {settings['EMBEDDING_API_KEY']}"
        url = _api_base(settings) + "/embeddings"
        try:
            async with self._http.post(
                    url, json=body, headers=headers,
                    timeout=aiohttp.ClientTimeout(total=deadline, sock_connect=10)) as resp:
                raw = await resp.read()
                retry_after = resp.headers.get("Retry-After")
                status = resp.status
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise EmbeddingError(f"embedding API unreachable ({type(exc).__name__})") from None
        try:
            payload: Any = json.loads(raw) if raw else None
        except ValueError:
            payload = raw[:300].decode("utf-8", "replace")
        if status == 429:
            raise EmbeddingError("embedding API rate limit (HTTP 429)", status=429,
                                 retry_after=_seconds(retry_after))
        return status, payload


def _forget(pending: dict[Any, Any], key: Any, task: asyncio.Task[Any]) -> None:
    """Done callback of a query embedding: drop it from the pending table and mark its
    failure as seen (a caller that gave up at the deadline no longer awaits it)."""
    if pending.get(key) is task:
        del pending[key]
    if not task.cancelled() and task.exception() is not None:
        log.debug("a late query embedding failed: %s", task.exception())


async def _given(value: T) -> T:
    return value


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


def _api_base(settings: Settings) -> str:
    base = str(settings.EMBEDDING_BASE_URL).rstrip("/")
    return base[: -len("/embeddings")] if base.endswith("/embeddings") else base


def _vectors_from(payload: Any, expected: int) -> np.ndarray:
    """Rows in input order from ``{"data": [{"index", "embedding"}]}``; validates the shape."""
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, list) or len(data) != expected:
        raise EmbeddingError("embedding API answered without one vector per input")
    try:
        ordered = sorted(data, key=lambda item: int(item.get("index", 0)))
        matrix = np.asarray([item["embedding"] for item in ordered], dtype=np.float32)
    except (KeyError, TypeError, ValueError):
        raise EmbeddingError("embedding API answered with malformed vectors") from None
    if matrix.ndim != 2 or matrix.shape[1] == 0 or not np.isfinite(matrix).all():
        raise EmbeddingError("embedding API answered with malformed vectors")
    return matrix


def _api_failure(status: int, payload: Any, secret: str) -> EmbeddingError:
    detail = ""
    if isinstance(payload, dict) and isinstance(payload.get("error"), dict):
        detail = str(payload["error"].get("message") or "")
    elif isinstance(payload, str):
        detail = payload
    detail = detail[:200]
    if secret:
        detail = detail.replace(secret, "****")
    message = f"embedding API answered HTTP {status}" + (f": {detail}" if detail else "")
    return EmbeddingError(message, status=status)


def _seconds(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None
