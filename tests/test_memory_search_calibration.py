"""Pins the local model's default semantic noise floor against the fixture.

e5 gives even unrelated Chinese texts cosines around 0.8-0.86, and a paraphrase can sit
below that, so no absolute cosine separates them: admission is by rank in the query's
neighbourhood (``search.fusion``) and the threshold is only a floor against noise. It must stay
below every paraphrase's cosine, and the neighbourhood must set the paraphrase apart where the
raw cosine cannot. If the model or the floor changes, this fails and the default must be
recalibrated.
"""

from __future__ import annotations

import numpy as np

from pawwake.llm.embeddings import DEFAULT_THRESHOLDS, Embedder
from pawwake.search import fusion
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


async def test_local_floor_admits_paraphrases_that_stand_out_of_their_neighbourhood() -> None:
    floor = DEFAULT_THRESHOLDS["local"]
    embedder = Embedder(http=None)
    settings = Settings.from_env({}, EMBEDDING_PROVIDER="local")
    try:
        passages, _ = await embedder.embed_passages(settings, [c for _, c, *_ in MEMORIES])
        unrelated_best = []
        for query in (*UNRELATED_QUERIES, *MORE_UNRELATED):
            vector, _ = await embedder.embed_query(settings, query)
            unrelated_best.append(float(np.max(passages @ vector)))
        for query, key in PARAPHRASES.items():
            vector, _ = await embedder.embed_query(settings, query)
            cosines = passages @ vector
            target = KEYS.index(key)
            assert int(np.argmax(cosines)) == target, query
            assert cosines[target] >= floor, (query, float(cosines[target]))
            nearest = sorted(((i, float(c)) for i, c in enumerate(cosines)),
                             key=lambda item: -item[1])[:fusion.NEIGHBOURHOOD]
            hood = fusion.Neighbourhood.of([c for _, c in nearest], floor)
            assert hood is not None and target in fusion.admitted(nearest, hood)
            assert hood.score(float(cosines[target])) > 0.5, query
    finally:
        await embedder.close()
    # Why a raw cosine cannot decide: unrelated queries reach what some paraphrases reach.
    assert max(unrelated_best) > floor
    assert max(unrelated_best) > DEFAULT_THRESHOLDS["api"] + 0.1
