"""Retrieval quality on the dev set (``tests/data/retrieval``), standalone; not run by pytest.

Recall@1, recall@5 and MRR per query category for keyword-only, hybrid on pgvector, hybrid on
the numpy index and the local model alone (every memory ranked by cosine); the mean number of
memories injected for queries with no related memory (default settings); search latency
p50/p95 at the dev set's size (query embedding excluded: vectors are computed beforehand).
Then what is injected with default settings, per store size (5, 20, 100, 1,000, 10,000
memories with near-miss distractors) and language pair, for the natural questions
(``tests/data/retrieval/natural.json``), and the frontier as the injection floor moves
(``tests/retrieval_sizes.py``).

    python bench/retrieval_quality.py [--fusion sum|rrf] [--set NAME=VALUE ...] [--sizes 5,20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from dataclasses import replace
from pathlib import Path

from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memory_search import memory_app

from pawwake.search import fusion, relevance
from pawwake.services import services_of
from tests import retrieval_devset as devset_mod
from tests import retrieval_sizes as sizes_mod

log = logging.getLogger("bench")


async def main(overrides: dict[str, object], sizes: list[int], quality: bool,
               fusing: fusion.Fusion, judging: relevance.Relevance,
               misses: bool = False) -> None:
    devset = devset_mod.load()
    log.info("dev set: %d memories, %d queries, %d none-queries", len(devset.memories),
             len(devset.queries), len(devset.none))
    async with memory_app() as app:
        if quality:
            await run(app, devset, overrides, fusing, judging)
        if sizes:
            await by_size(app, overrides, sizes, fusing, judging, misses)


async def by_size(app: web.Application, overrides: dict[str, object], sizes: list[int],
                  fusing: fusion.Fusion, judging: relevance.Relevance,
                  misses: bool = False) -> None:
    import tempfile

    data = sizes_mod.corpus(Path(tempfile.gettempdir()), max(sizes))
    settings = services_of(app).config.current().with_values(overrides)
    floor = float(settings.MEMORY_INJECT_MIN_RELEVANCE)
    log.info("natural questions: %d about %d memories, %d unrelated chats",
             len(data.natural.questions), len(data.natural.memories), len(data.natural.none))
    reports = {size: await sizes_mod.evaluate_size(app, data, size, settings, fusing=fusing,
                                                       judging=judging)
               for size in sizes}
    log.info("%s", sizes_mod.size_table("without a memory model", reports, floor))
    log.info("%s", sizes_mod.frontier("without a memory model", reports))
    if misses:
        log.info("%s", sizes_mod.misses_table("without a memory model", reports, floor))
    helped = {size: await sizes_mod.evaluate_size(app, data, size, settings,
                                                  sizes_mod.model_described, fusing, judging)
              for size in sizes}
    label = "with a memory model (deterministic stand-in, tests/memory_model_fake.py)"
    log.info("%s", sizes_mod.size_table(label, helped, floor))
    log.info("%s", sizes_mod.frontier(label, helped))
    if misses:
        log.info("%s", sizes_mod.misses_table("with a memory model", helped, floor))


async def run(app: web.Application, devset: devset_mod.DevSet, overrides: dict[str, object],
              fusing: fusion.Fusion, judging: relevance.Relevance) -> None:
    from pawwake.search.terms import ensure_tokenizer

    await ensure_tokenizer(services_of(app).settings.PAWWAKE_DATA_DIR)
    vectors = devset_mod.embed(devset)
    base = services_of(app).config.current().with_values(overrides)
    ids = await devset_mod.fill(app, devset, vectors, base)
    log.info("%s", devset_mod.table("semantic-only (model alone)",
                                    devset_mod.semantic_only(devset, vectors)))
    for label, extra in (("keyword-only", {"MEMORY_VECTOR_ENABLED": False}),
                         ("hybrid pgvector", {"VECTOR_BACKEND": "pgvector"}),
                         ("hybrid numpy", {"VECTOR_BACKEND": "numpy"})):
        settings = base.with_values(extra)
        await devset_mod.evaluate(app, devset, ids, settings, fusing, judging)  # warm caches
        report = await devset_mod.evaluate(app, devset, ids, settings, fusing, judging)
        log.info("%s", devset_mod.table(label, report))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fusion", choices=("sum", "rrf"), default="sum",
                        help="calibrated sum (the product's) or reciprocal-rank fusion")
    parser.add_argument("--no-literal-first", action="store_true",
                        help="switch off the flat-top literal rule (fusion.literal_first)")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="a setting for every mode, e.g. MIN_SCORE_THRESHOLD=0.2")
    parser.add_argument("--sizes", default=",".join(map(str, sizes_mod.SIZES)),
                        help="store sizes for the injection report (empty: none)")
    parser.add_argument("--no-quality", action="store_true",
                        help="skip the dev-set recall figures")
    parser.add_argument("--misses", action="store_true",
                        help="list each question whose memory is not injected, with why")
    parser.add_argument("--relevance", metavar="STANDING,KEYWORD,CROSS,OFFSET",
                        help="try other coefficients of search/relevance.py (passed down the search)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    for noisy in ("pawwake", "aiohttp"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    judging = relevance.CALIBRATED
    if args.relevance:
        standing, keyword, cross, offset = (float(v) for v in args.relevance.split(","))
        judging = replace(judging, standing=standing, keyword=keyword, cross_keyword=cross,
                          offset=offset)
    fusing = fusion.Fusion(args.fusion, literal_first=not args.no_literal_first)
    values = {}
    for item in args.set:
        name, _, raw = item.partition("=")
        try:  # numbers, true/false/null; anything else (VECTOR_BACKEND=numpy) as written
            values[name] = json.loads(raw)
        except json.JSONDecodeError:
            values[name] = raw
    asyncio.run(main(values, [int(n) for n in args.sizes.split(",") if n],
                     not args.no_quality, fusing, judging, args.misses))
