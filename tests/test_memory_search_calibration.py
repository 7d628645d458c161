"""Pins the local model's default semantic threshold against the fixture.

e5 gives even unrelated Chinese texts cosines around 0.8-0.86, so a threshold made for
OpenAI-style models (0.7) would let everything in. If the model or the threshold changes,
this fails and the default must be recalibrated.
"""

from __future__ import annotations

import numpy as np

from pawwake.llm.embeddings import DEFAULT_THRESHOLDS, Embedder
from pawwake.settings import Settings
from tests.memory_fixtures import KEYS, MEMORIES, UNRELATED_QUERIES

PARAPHRASES = {
    "过年": "spring_festival",
    "看牙医": "dental",
    "我家猫叫什么名字": "cat",
    "父亲的血压": "dad_health",
    "外公的手术": "grandpa",
    "膝盖受伤": "knee",
    "给妈妈的生日礼物": "mom_birthday",
}
MORE_UNRELATED = ("火星上的沙尘暴", "明朝的科举制度", "the GDP of Norway in 1970",
                  "best way to clean a cast iron pan", "如何更换汽车轮胎")


async def test_local_threshold_separates_paraphrases_from_unrelated_queries() -> None:
    threshold = DEFAULT_THRESHOLDS["local"]
    embedder = Embedder(http=None)
    settings = Settings.from_env({}, EMBEDDING_PROVIDER="local")
    try:
        passages, _ = await embedder.embed_passages(settings, [c for _, c, *_ in MEMORIES])
        for query, key in PARAPHRASES.items():
            vector, _ = await embedder.embed_query(settings, query)
            cosines = passages @ vector
            target = KEYS.index(key)
            assert int(np.argmax(cosines)) == target, query
            assert cosines[target] >= threshold, (query, float(cosines[target]))
        unrelated_best = []
        for query in (*UNRELATED_QUERIES, *MORE_UNRELATED):
            vector, _ = await embedder.embed_query(settings, query)
            best = float(np.max(passages @ vector))
            assert best < threshold, (query, best)
            unrelated_best.append(best)
    finally:
        await embedder.close()
    # The reason for a per-provider default: with e5, unrelated texts clear the API default.
    assert max(unrelated_best) > DEFAULT_THRESHOLDS["api"] + 0.1
