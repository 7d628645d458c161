"""The rows of the numpy vector index in memory, and the products over them.

Rows are appended and never overwritten in place: a replaced or deleted vector's row is marked
dead and the arrays are compacted into new ones once enough rows died (or when full with an
eighth of them dead, rather than grown: a bounded index lets its oldest rows go as new ones
come, and would otherwise grow to twice its bound), so a product running on a snapshot in a
worker thread never sees a half-written row. Beside each row are its source
id, its content digest (an array: as a dict of strings the digests took 17 MB at 100k rows)
and its product with one fixed direction (``along``), so a look from a vector in the plane of
the query and that direction costs no second product over the rows:
``X (a q + b d) = a (X q) + b (X d)``.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

SHA_DTYPE = np.dtype("S64")  # a content digest (``vector_rows.content_sha``: 64 hex digits)


class Matrix:
    """Append-only rows of unit vectors plus their source ids (-1 = dead row), digests and
    products with the fixed direction."""

    def __init__(self, dim: int, capacity: int = 1024) -> None:
        self.dim = dim
        self.vectors = np.zeros((capacity, dim), dtype=np.float32)
        self.ids = np.full(capacity, -1, dtype=np.int64)
        self.size = 0
        self.dead = 0
        self.rows: dict[int, int] = {}  # source id -> row
        self.shas = np.zeros(capacity, dtype=SHA_DTYPE)  # each row's content digest
        self.direction: np.ndarray | None = None  # the fixed direction ``along`` is kept for
        self.along = np.zeros(capacity, dtype=np.float32)  # each row's product with it
        self.compactions = 0

    def append(self, source_id: int, sha: str, vector: np.ndarray) -> None:
        old = self.rows.get(source_id)
        if old is not None:
            if self.shas[old] == sha.encode():
                return
            self.ids[old] = -1
            self.dead += 1
        if self.size == len(self.ids):  # full: drop the dead rows first if they are many
            if self.dead > 128 and self.dead * 8 >= self.size:
                self._compact()
            else:
                self._grow()
        norm = float(np.linalg.norm(vector))
        self.vectors[self.size] = vector / norm if norm else vector
        if self.direction is not None:
            self.along[self.size] = self.vectors[self.size] @ self.direction
        self.ids[self.size] = source_id
        self.rows[source_id] = self.size
        self.shas[self.size] = sha.encode()
        self.size += 1

    def remove(self, source_ids: Iterable[int]) -> None:
        for source_id in source_ids:
            row = self.rows.pop(source_id, None)
            if row is not None:
                self.ids[row] = -1
                self.dead += 1
        if self.dead > 1024 and self.dead * 4 > self.size:
            self._compact()

    def _grow(self) -> None:
        capacity = max(1024, int(len(self.ids) * 1.5))
        vectors = np.zeros((capacity, self.dim), dtype=np.float32)
        ids = np.full(capacity, -1, dtype=np.int64)
        along = np.zeros(capacity, dtype=np.float32)
        shas = np.zeros(capacity, dtype=SHA_DTYPE)
        vectors[: self.size] = self.vectors[: self.size]
        ids[: self.size] = self.ids[: self.size]
        along[: self.size] = self.along[: self.size]
        shas[: self.size] = self.shas[: self.size]
        self.vectors, self.ids, self.along, self.shas = vectors, ids, along, shas

    def _compact(self) -> None:
        live = np.flatnonzero(self.ids[: self.size] >= 0)
        capacity = max(1024, int(len(live) * 1.25))
        vectors = np.zeros((capacity, self.dim), dtype=np.float32)
        ids = np.full(capacity, -1, dtype=np.int64)
        along = np.zeros(capacity, dtype=np.float32)
        shas = np.zeros(capacity, dtype=SHA_DTYPE)
        vectors[: len(live)] = self.vectors[live]
        ids[: len(live)] = self.ids[live]
        along[: len(live)] = self.along[live]
        shas[: len(live)] = self.shas[live]
        self.vectors, self.ids, self.along, self.shas = vectors, ids, along, shas
        self.size, self.dead = len(live), 0
        self.compactions += 1
        self.rows = {int(source_id): row for row, source_id in enumerate(ids[: self.size])}

    def sha_of(self, source_id: int) -> str | None:
        """The content digest of ``source_id``'s vector (None: not held)."""
        row = self.rows.get(source_id)
        return None if row is None else bytes(self.shas[row]).decode()

    @property
    def live(self) -> int:
        return self.size - self.dead

    def snapshot(self) -> tuple[np.ndarray, np.ndarray]:
        """Views that later appends and marks cannot tear (rows are never rewritten)."""
        return self.vectors[: self.size], self.ids[: self.size]

    def aims_at(self, direction: np.ndarray) -> bool:
        return self.direction is not None and np.array_equal(self.direction, direction)

    def aim(self, direction: np.ndarray, products: np.ndarray, compactions: int) -> bool:
        """Keep ``along`` for ``direction``, given the products of the first
        ``len(products)`` rows made while ``compactions`` compactions had run (a compaction
        since moved the rows: False, nothing changed). Later rows are multiplied here."""
        if compactions != self.compactions or len(products) > self.size:
            return False
        along = np.zeros(len(self.ids), dtype=np.float32)
        along[: len(products)] = products
        along[len(products): self.size] = self.vectors[len(products): self.size] @ direction
        self.along, self.direction = along, direction
        return True


def _best(scores: np.ndarray, ids: np.ndarray, k: int,
          shut: np.ndarray) -> list[tuple[int, float]]:
    """The ``k`` best ``scores`` whose row is not ``shut``, as ``(source id, score)``."""
    if len(ids) == 0 or k <= 0:
        return []
    scores[shut] = -np.inf
    k = min(k, len(scores))
    picked = np.argpartition(-scores, k - 1)[:k]
    picked = picked[np.argsort(-scores[picked], kind="stable")]
    return [(int(ids[i]), float(scores[i])) for i in picked if np.isfinite(scores[i])]


def _shut(ids: np.ndarray, exclude: frozenset[int]) -> np.ndarray:
    shut = ids < 0
    if exclude:
        shut |= np.isin(ids, np.fromiter(exclude, dtype=np.int64))
    return shut


def top_k(vectors: np.ndarray, ids: np.ndarray, query: np.ndarray, k: int,
          exclude: frozenset[int] = frozenset()) -> list[tuple[int, float]]:
    """The ``k`` live rows most similar to ``query`` as ``(source id, cosine)``, best first."""
    if len(ids) == 0 or k <= 0:
        return []
    return _best(vectors @ query, ids, k, _shut(ids, exclude))


def top_k_pair(vectors: np.ndarray, ids: np.ndarray, along: np.ndarray, query: np.ndarray,
               k: int, mix: tuple[float, float], other_k: int,
               exclude: frozenset[int] = frozenset()
               ) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
    """``top_k`` of ``query`` and of ``mix[0] * query + mix[1] * direction`` (``along``: each
    row's product with the direction) from one product over the rows."""
    if len(ids) == 0:
        return [], []
    scores = vectors @ query
    shut = _shut(ids, exclude)
    other = mix[0] * scores + mix[1] * along
    return _best(scores, ids, k, shut), _best(other, ids, other_k, shut)


def in_plane(query: np.ndarray, direction: np.ndarray,
             other: np.ndarray) -> tuple[float, float] | None:
    """``(a, b)`` with ``other == a * query + b * direction`` (None when ``other`` is not in
    their plane, or the two are parallel)."""
    q, d, o = (np.asarray(v, dtype=np.float64) for v in (query, direction, other))
    gram = np.array([[q @ q, q @ d], [q @ d, d @ d]])
    if abs(float(np.linalg.det(gram))) < 1e-9:
        return None
    a, b = np.linalg.solve(gram, np.array([o @ q, o @ d]))
    if float(np.linalg.norm(o - a * q - b * d)) > 1e-5 * max(1.0, float(np.linalg.norm(o))):
        return None
    return float(a), float(b)
