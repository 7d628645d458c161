"""Regression over the retrieval dev set (``tests/data/retrieval``) with the local model.

The dev set is embedded once (10-60 s; the vectors are kept in the temp folder under a name
made of the model version and every text) and the vectors go straight into the database and
the query cache, so each test costs a fill and the searches. A category that
drops more than ``TOLERANCE`` below the figures reached (``bench/retrieval_quality.py``) fails.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest

from pawwake.search.terms import ensure_tokenizer
from pawwake.services import services_of
from tests import retrieval_devset as devset_mod

LOCAL = {"EMBEDDING_PROVIDER": "local", "JOB_WORKERS": 0, "MEMORY_ENABLED": True}
TOLERANCE = 0.03
# Recall@5 and MRR reached, hybrid search with the local model (pgvector and numpy alike).
HYBRID = {
    "literal": (0.989, 0.955), "paraphrase": (0.793, 0.652), "cross_from_en": (0.895, 0.710),
    "cross_from_zh": (0.048, 0.017), "short": (0.983, 0.900), "temporal": (1.0, 0.821),
}
KEYWORD_ONLY = {"literal": (0.967, 0.863), "short": (0.864, 0.752)}
NONE_INJECTED_AT_MOST = 1.0


@pytest.fixture(scope="session")
def devset() -> devset_mod.DevSet:
    return devset_mod.load()


@pytest.fixture(scope="session")
def devset_vectors(devset: devset_mod.DevSet) -> devset_mod.Vectors:
    from pawwake.text import tokens

    tokens.load()  # query texts are condensed with the keywords before they are embedded
    return devset_mod.embed(devset, Path(tempfile.gettempdir()))


async def filled(make_client: Any, devset: devset_mod.DevSet,
                 vectors: devset_mod.Vectors) -> tuple[Any, list[int]]:
    client = await make_client(**LOCAL)
    app = client.server.app
    await ensure_tokenizer(services_of(app).settings.PAWWAKE_DATA_DIR)
    ids = await devset_mod.fill(app, devset, vectors, await services_of(app).config.fresh())
    return app, ids


def test_the_dev_set_is_big_enough(devset: devset_mod.DevSet) -> None:
    assert len(devset.memories) >= 300
    assert len(devset.queries) + len(devset.none) >= 200
    categories = {q.category for q in devset.queries}
    assert categories == {"literal", "paraphrase", "cross", "short", "temporal"}
    assert len(devset.none) >= 20


def below(report: devset_mod.Report, reached: dict[str, tuple[float, float]]) -> list[str]:
    drops = []
    for category, (recall5, mrr) in reached.items():
        got = report.figures[category]
        if got["recall5"] < recall5 - TOLERANCE or got["mrr"] < mrr - TOLERANCE:
            drops.append(f"{category}: R@5 {got['recall5']:.3f} (was {recall5}),"
                         f" MRR {got['mrr']:.3f} (was {mrr})")
    return drops


async def test_hybrid_search_keeps_its_figures(make_client: Any, devset: devset_mod.DevSet,
                                               devset_vectors: devset_mod.Vectors) -> None:
    app, ids = await filled(make_client, devset, devset_vectors)
    settings = await services_of(app).config.fresh()
    report = await devset_mod.evaluate(app, devset, ids, settings)
    assert report.modes == {"hybrid"}
    assert below(report, HYBRID) == [], devset_mod.table("hybrid", report)
    # The fusion never loses what the model alone finds.
    alone = devset_mod.semantic_only(devset, devset_vectors)
    for category, figures in alone.figures.items():
        assert report.figures[category]["recall5"] >= figures["recall5"] - 1e-9, category
    assert report.none_injected <= NONE_INJECTED_AT_MOST

    keyword = await devset_mod.evaluate(app, devset, ids,
                                        settings.with_values({"MEMORY_VECTOR_ENABLED": False}))
    assert keyword.modes == {"keyword"}
    assert below(keyword, KEYWORD_ONLY) == [], devset_mod.table("keyword-only", keyword)


async def test_pgvector_and_numpy_give_the_same_top_five(
        make_client: Any, devset: devset_mod.DevSet,
        devset_vectors: devset_mod.Vectors) -> None:
    app, ids = await filled(make_client, devset, devset_vectors)
    assert services_of(app).database.pgvector
    settings = await services_of(app).config.fresh()
    on_pgvector = await devset_mod.evaluate(
        app, devset, ids, settings.with_values({"VECTOR_BACKEND": "pgvector"}))
    on_numpy = await devset_mod.evaluate(
        app, devset, ids, settings.with_values({"VECTOR_BACKEND": "numpy"}))
    assert on_pgvector.top5 == on_numpy.top5
    assert on_pgvector.figures == on_numpy.figures
