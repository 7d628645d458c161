"""Fit ``pawwake/search/relevance.py`` on the retrieval dev set (standalone; not run by pytest).

Every labelled query and every "none" query of the dev set is searched (300 memories, local
model, no floors); each candidate's evidence (standing above the background, keyword evidence,
cross-language) is a sample, labelled by whether it is the query's memory. A logistic model is
fitted by Newton steps (hybrid: standing, keyword, keyword x cross; keyword-only: keyword). The
offsets printed are the fit's own; the product's offset is then set on the natural questions'
frontier (``bench/retrieval_quality.py``), since the dev set's share of right answers (one in
300) is not a store's.

    python bench/relevance_fit.py
"""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memory_search import memory_app

from pawwake.memory.search import search_memories
from pawwake.search import relevance
from pawwake.search.terms import ensure_tokenizer
from pawwake.services import services_of
from tests import retrieval_devset as devset_mod

log = logging.getLogger("bench")
OPEN = {"MIN_SCORE_THRESHOLD": 0.0, "MEMORY_INJECT_MIN_RELEVANCE": 0.0}


def logistic_fit(features: np.ndarray, labels: np.ndarray, l2: float = 1e-3,
                 steps: int = 50) -> np.ndarray:
    """Weights (intercept first) of a logistic model, by Newton's method."""
    design = np.column_stack([np.ones(len(features)), features])
    weights = np.zeros(design.shape[1])
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-design @ weights))
        gradient = design.T @ (p - labels) + l2 * weights
        hessian = (design * (p * (1 - p))[:, None]).T @ design + l2 * np.eye(len(weights))
        weights -= np.linalg.solve(hessian, gradient)
    return weights


async def samples(app: object, devset: devset_mod.DevSet, ids: list[int],
                  settings: object) -> tuple[np.ndarray, np.ndarray]:
    rows, labels = [], []
    queries = [(q.text, ids[q.target]) for q in devset.queries] + [(t, -1) for t in devset.none]
    for text, target in queries:
        outcome = await search_memories(services_of(app).memory_search, text, limit=100, settings=settings,
                                        touch=False)
        for result in outcome.results:
            evidence = result.evidence
            assert evidence is not None
            rows.append((np.nan if evidence.standing is None else evidence.standing,
                         evidence.keyword, float(evidence.cross)))
            labels.append(float(result.id == target))
    return np.asarray(rows), np.asarray(labels)


async def main() -> None:
    devset = devset_mod.load()
    async with memory_app() as app:
        await ensure_tokenizer(services_of(app).settings.PAWWAKE_DATA_DIR)
        vectors = devset_mod.embed(devset)
        base = services_of(app).config.current().with_values(OPEN)
        ids = await devset_mod.fill(app, devset, vectors, base)
        hybrid, labels = await samples(app, devset, ids, base)
        with_cosine = ~np.isnan(hybrid[:, 0])
        x = hybrid[with_cosine]
        fitted = logistic_fit(np.column_stack([x[:, 0], x[:, 1], x[:, 1] * x[:, 2]]),
                              labels[with_cosine])
        log.info("hybrid fit: offset %.2f, standing %.2f, keyword %.2f, cross keyword %.2f"
                 " (%d samples, %d right)", -fitted[0], fitted[1], fitted[2], fitted[3],
                 int(with_cosine.sum()), int(labels[with_cosine].sum()))
        log.info("in use:     offset %.2f, standing %.2f, keyword %.2f, cross keyword %.2f",
                 relevance.CALIBRATED.offset, relevance.CALIBRATED.standing,
                 relevance.CALIBRATED.keyword, relevance.CALIBRATED.cross_keyword)
        keyword, labels = await samples(app, devset, ids,
                                        base.with_values({"MEMORY_VECTOR_ENABLED": False}))
        fitted = logistic_fit(keyword[:, 1:2], labels)
        log.info("keyword-only fit: offset %.2f, keyword %.2f (%d samples, %d right);"
                 " in use: offset %.2f, keyword %.2f", -fitted[0], fitted[1], len(labels),
                 int(labels.sum()), relevance.CALIBRATED.keyword_only_offset,
                 relevance.CALIBRATED.keyword_only)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    for noisy in ("pawwake", "aiohttp"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    asyncio.run(main())
