"""The numpy vector index: vectors held in process when pgvector is not available.

One index serves one vector table (memory vectors by default, conversation recall keeps one
for message vectors). Loaded once per provenance, then kept current incrementally: vectors
this process stores are added directly (also while the index loads: kept for the loaded
arrays); vectors written by other processes are found by a
cheap "newest write" check at most every ``refresh_seconds`` (only their ids and digests are
listed, and only vectors not held yet are fetched); deletions are noticed by a count every
``reconcile_seconds``. The rows and the products over them (append-only, so a search on a
snapshot in a worker thread never sees a half-written row): ``search.vector_matrix``.

An index may hold only the newest ``most`` rows (by source id; the written questions' index
is bounded so: ``memory.question_vectors``). Older rows are neither loaded nor fetched;
the bound is taken again at each reconcile, so between two the index may run over it by the
rows written meanwhile.

A scan of the rows is the cost of a search (at 100k vectors of 384 dims, 150 MB read per
product). A search that also looks from a second vector in the plane of the query and one
fixed direction (a Chinese query with its language's pull taken out,
``search.background.Reference.across``) needs no second scan (``search_pair``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import aiopg
import numpy as np

from pawwake.db import vector_rows
from pawwake.db.memory_embeddings import MEMORY_VECTORS
from pawwake.db.pool import DATABASE_ERRORS, cursor
from pawwake.db.vector_rows import VectorSource, VectorTable
from pawwake.search.vector_matrix import Matrix, in_plane, top_k, top_k_pair

if TYPE_CHECKING:
    from pawwake.database import Database
    from pawwake.llm.embeddings import Embedder
    from pawwake.search.vector_backend import VectorBackend
    from pawwake.settings import Settings

log = logging.getLogger(__name__)

LOAD_PAGE = 5000
LATE_COMMIT_WINDOW = timedelta(seconds=60)  # a transaction may commit after newer rows did
THREAD_THRESHOLD = 20_000  # rows above which the product runs in a worker thread
NOTHING_HELD = 2**62  # the lowest id held when an index may hold no row at all


class VectorIndex:
    """Cosine search over one provenance's vectors, kept in memory and refreshed cheaply."""

    def __init__(self, refresh_seconds: float = 3.0, reconcile_seconds: float = 60.0,
                 table: VectorTable = MEMORY_VECTORS, most: int | None = None) -> None:
        self.table = table
        self.most = most  # the newest rows held (None: all); a change reloads
        self._held_most: int | None = None  # the bound the held rows were loaded under
        self._floor = 0  # the lowest source id held (0 unless bounded)
        self.refresh_seconds = refresh_seconds
        self.reconcile_seconds = reconcile_seconds
        self._reconciled_at = 0.0
        self._provenance: Any = None
        self._matrix: Matrix | None = None
        self._loading: Any = None  # the provenance being loaded
        self._stored_while_loading: list[tuple[int, str, np.ndarray]] = []
        self._newest: datetime | None = None
        self._checked_at = 0.0
        self._lock = asyncio.Lock()
        self.loads = 0  # full loads so far (figures tests and the benchmark read)
        self.fetched = 0  # vectors read from the database so far
        self.scans = 0  # products over all the rows so far

    @property
    def size(self) -> int:
        return self._matrix.live if self._matrix is not None else 0

    async def store(self, pool: aiopg.Pool, provenance: VectorSource,
                    rows: Sequence[tuple[int, str, np.ndarray]]) -> list[int]:
        """Save ``(source id, content sha, vector)`` rows in this index's table and add them
        here; returns the ids stored (rows edited or deleted meanwhile are skipped)."""
        async with cursor(pool) as cur:
            stored = set(await vector_rows.store_vectors(cur, self.table, provenance, rows))
        self.add(provenance, [row for row in rows if row[0] in stored])
        return sorted(stored)

    def add(self, provenance: Any, rows: Sequence[tuple[int, str, np.ndarray]]) -> None:
        """Vectors this process just stored; ignored unless the index holds (or is loading)
        that provenance."""
        if provenance == self._loading:  # the load may have read its pages before they came
            self._stored_while_loading.extend(rows)
        if self._matrix is None or provenance != self._provenance:
            return
        for source_id, sha, vector in rows:
            if source_id >= self._floor:
                self._matrix.append(source_id, sha, vector)

    async def warm(self, pool: aiopg.Pool, provenance: Any) -> None:
        """Load now (at start), so the first search does not wait for it."""
        await self._current(pool, provenance)

    async def search(self, pool: aiopg.Pool, provenance: Any, query: np.ndarray, k: int,
                     exclude: Iterable[int] = ()) -> list[tuple[int, float]]:
        matrix = await self._current(pool, provenance)
        vectors, ids = matrix.snapshot()
        excluded = frozenset(int(i) for i in exclude)
        self.scans += 1
        if len(ids) > THREAD_THRESHOLD:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(None, top_k, vectors, ids, query, k, excluded)
        return top_k(vectors, ids, query, k, excluded)

    async def search_pair(self, pool: aiopg.Pool, provenance: Any, query: np.ndarray, k: int,
                          other: np.ndarray, other_k: int, direction: np.ndarray,
                          exclude: Iterable[int] = ()
                          ) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
        """``search`` of ``query`` and of ``other`` at the cost of one: ``other`` lies in the
        plane of ``query`` and ``direction``, a fixed vector (the same on every call) whose
        product with each row is kept. Any other ``other`` takes a second scan."""
        mix = in_plane(query, direction, other)
        if mix is None:
            return (await self.search(pool, provenance, query, k, exclude),
                    await self.search(pool, provenance, other, other_k, exclude))
        while True:  # the rows' products with the direction: made once, then kept
            matrix = await self._current(pool, provenance)
            if matrix.aims_at(direction):
                break
            vectors, _ids = matrix.snapshot()
            compactions = matrix.compactions
            products = await self._product(vectors, direction)
            matrix.aim(np.array(direction, dtype=np.float32), products, compactions)
        vectors, ids = matrix.snapshot()
        along = matrix.along[: len(ids)]
        excluded = frozenset(int(i) for i in exclude)
        self.scans += 1
        if len(ids) > THREAD_THRESHOLD:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(None, top_k_pair, vectors, ids, along, query, k,
                                              mix, other_k, excluded)
        return top_k_pair(vectors, ids, along, query, k, mix, other_k, excluded)

    async def _product(self, vectors: np.ndarray, vector: np.ndarray) -> np.ndarray:
        self.scans += 1
        if len(vectors) > THREAD_THRESHOLD:
            loop = asyncio.get_running_loop()
            found: np.ndarray = await loop.run_in_executor(None, np.dot, vectors, vector)
            return found
        product: np.ndarray = vectors @ vector
        return product

    async def cosines_for(self, pool: aiopg.Pool, provenance: Any, query: np.ndarray,
                          source_ids: Iterable[int]) -> dict[int, float]:
        """Each held row's cosine with ``query``: one product over the rows asked for (a
        product per row took 3-5 ms for the 1,500 questions of 500 memories)."""
        matrix = await self._current(pool, provenance)
        ids, rows = self._held_rows(matrix, source_ids)
        if not len(rows):
            return {}
        return dict(zip(ids.tolist(), (matrix.vectors[rows] @ query).tolist(), strict=True))

    @staticmethod
    def _held_rows(matrix: Matrix, source_ids: Iterable[int]) -> tuple[np.ndarray, np.ndarray]:
        """The ids among ``source_ids`` held in ``matrix`` and their rows, in that order."""
        wanted = np.fromiter((int(i) for i in source_ids), dtype=np.int64)
        rows = np.fromiter((matrix.rows.get(i, -1) for i in wanted.tolist()), dtype=np.intp,
                           count=len(wanted))
        held = rows >= 0
        return wanted[held], rows[held]

    async def products_for(self, pool: aiopg.Pool, provenance: Any,
                           vectors: Sequence[np.ndarray], source_ids: Iterable[int]
                           ) -> dict[int, list[float]]:
        """Each held row's dot products with ``vectors``, in one product over the rows asked
        for (``cosines_for`` per row and vector took 12 ms for 500 rows and two vectors on
        a loaded machine)."""
        matrix = await self._current(pool, provenance)
        ids, rows = self._held_rows(matrix, source_ids)
        if not len(rows) or not vectors:
            return {}
        products = matrix.vectors[rows] @ np.stack(vectors, axis=1).astype(np.float32)
        return dict(zip(ids.tolist(), products.tolist(), strict=True))

    async def mean(self, pool: aiopg.Pool, provenance: Any) -> tuple[np.ndarray | None, int]:
        """The mean of the provenance's live vectors and their number (None when empty):
        the collection's background. A product over the rows, no copy of them."""
        matrix = await self._current(pool, provenance)
        vectors, ids = matrix.snapshot()
        live = (ids >= 0).astype(np.float32)
        count = int(live.sum())
        if not count:
            return None, 0
        self.scans += 1
        if len(ids) > THREAD_THRESHOLD:
            loop = asyncio.get_running_loop()
            total = await loop.run_in_executor(None, np.dot, live, vectors)
        else:
            total = live @ vectors
        return total / count, count

    async def _current(self, pool: aiopg.Pool, provenance: Any) -> Matrix:
        if (self._matrix is not None and provenance == self._provenance
                and self.most == self._held_most
                and time.monotonic() - self._checked_at < self.refresh_seconds):
            return self._matrix
        async with self._lock:
            if (self._matrix is None or provenance != self._provenance
                    or self.most != self._held_most):
                await self._load(pool, provenance)
            elif time.monotonic() - self._checked_at >= self.refresh_seconds:
                await self._refresh(pool)
            assert self._matrix is not None
            return self._matrix

    async def _load(self, pool: aiopg.Pool, provenance: Any) -> None:
        self._loading, self._stored_while_loading = provenance, []
        try:
            await self._load_pages(pool, provenance)
        finally:
            self._loading, self._stored_while_loading = None, []

    async def _load_pages(self, pool: aiopg.Pool, provenance: Any) -> None:
        started = time.monotonic()
        most = self.most
        async with cursor(pool) as cur:
            count = await vector_rows.vector_count(cur, self.table, provenance)
            newest = await vector_rows.newest_vector(cur, self.table, provenance)
            floor = await self._floor_of(cur, provenance, count, most)
        if floor:
            count = min(count, most or 0)
        matrix = Matrix(int(provenance.dim), capacity=max(1024, int(count * 1.1) + 64))
        after = max(0, floor - 1)
        while True:
            async with cursor(pool) as cur:
                page = await vector_rows.fetch_vectors(cur, self.table, provenance,
                                                       after_id=after, limit=LOAD_PAGE)
            for source_id, sha, created, vector in page:
                matrix.append(source_id, sha, vector)
                newest = created if newest is None or created > newest else newest
            self.fetched += len(page)
            if len(page) < LOAD_PAGE:
                break
            after = page[-1][0]
        for source_id, sha, vector in self._stored_while_loading:
            if source_id >= floor:
                matrix.append(source_id, sha, vector)
        self._matrix, self._provenance, self._newest = matrix, provenance, newest
        self._floor, self._held_most = floor, most
        self._checked_at = self._reconciled_at = time.monotonic()
        self.loads += 1
        log.info("vector index loaded: %s vectors of %s (%s) in %.2f s", matrix.live,
                 self.table.name, provenance.model, time.monotonic() - started)

    async def _floor_of(self, cur: Any, provenance: Any, count: int, most: int | None) -> int:
        """The lowest source id the newest ``most`` of ``count`` rows have (0: all fit)."""
        if most is None or count <= most:
            return 0
        if most <= 0:
            return NOTHING_HELD
        return await vector_rows.newest_ids_from(cur, self.table, provenance, most)

    async def _refresh(self, pool: aiopg.Pool) -> None:
        """Fetch vectors other processes wrote since the last look; reconcile deletions.

        Rows written within ``LATE_COMMIT_WINDOW`` before the newest one seen are listed again
        (a transaction may commit after a newer row did); only vectors not held yet with that
        digest are fetched.
        """
        assert self._matrix is not None
        matrix, provenance = self._matrix, self._provenance
        async with cursor(pool) as cur:
            newest = await vector_rows.newest_vector(cur, self.table, provenance)
        if newest is not None and (self._newest is None or newest > self._newest):
            since = None if self._newest is None else self._newest - LATE_COMMIT_WINDOW
            async with cursor(pool) as cur:
                recent = await vector_rows.vector_shas_since(cur, self.table, provenance, since)
            await self._fetch_ids(pool, provenance, [
                source_id for source_id, sha in recent
                if source_id >= self._floor and matrix.sha_of(source_id) != sha])
            self._newest = newest
        now = time.monotonic()
        if now - self._reconciled_at >= self.reconcile_seconds:
            self._reconciled_at = now
            async with cursor(pool) as cur:
                count = await vector_rows.vector_count(cur, self.table, provenance)
                floor = await self._floor_of(cur, provenance, count, self.most)
            lowered = floor < self._floor  # rows below the held ones are due again
            if floor:  # bounded: the newest ``most`` rows, the older ones let go
                count = min(count, self.most or 0)
                if floor > self._floor:
                    matrix.remove([i for i in list(matrix.rows) if i < floor])
            self._floor = floor
            if count != matrix.live or lowered:
                async with cursor(pool) as cur:
                    stored = set(await vector_rows.vector_ids(cur, self.table, provenance,
                                                              from_id=floor))
                matrix.remove([i for i in list(matrix.rows) if i not in stored])
                await self._fetch_ids(pool, provenance,
                                      [i for i in stored if i not in matrix.rows])
        self._checked_at = time.monotonic()

    async def _fetch_ids(self, pool: aiopg.Pool, provenance: Any, ids: Sequence[int]) -> None:
        assert self._matrix is not None
        for start in range(0, len(ids), LOAD_PAGE):
            async with cursor(pool) as cur:
                page = await vector_rows.fetch_vectors(cur, self.table, provenance,
                                                       ids=ids[start:start + LOAD_PAGE],
                                                       limit=LOAD_PAGE)
            for source_id, sha, _created, vector in page:
                self._matrix.append(source_id, sha, vector)
            self.fetched += len(page)


async def warm_if_numpy(index: VectorIndex, choice: VectorBackend, settings: Settings,
                        database: Database, embedder: Embedder, what: str) -> None:
    """Load ``index`` in the background when numpy is the backend searches will use (at 100k
    rows that takes seconds the first chat request should not wait); a failure is logged."""
    provenance = embedder.configured_provenance(settings)
    if await choice.choose(settings, database, provenance, index.table) != "numpy":
        return
    try:
        await index.warm(database.pool, provenance)
    except DATABASE_ERRORS as exc:
        log.warning("could not preload the %s vector index: %s", what, type(exc).__name__)
