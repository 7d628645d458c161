"""Reading CC-CEDICT lines into the two tables (``text.lexicon.parse``)."""

from __future__ import annotations

from pawwake.text.lexicon import glossing, parse

LINES = [
    "# a comment",
    "東京 东京 [Dong1 jing1] /Tokyo, capital of Japan/",
    "多倫多 多伦多 [Duo1 lun2 duo1] /Toronto, capital of Ontario, Canada/",
    "花生 花生 [hua1 sheng1] /peanut/CL:粒[li4]/",
    "跑步 跑步 [pao3 bu4] /to walk quickly; to march; to run/",
    "說明書 说明书 [shuo1 ming2 shu1] /a long explanation of how a machine works in detail/",
]


def test_a_names_gloss_gives_the_name_and_a_long_definition_nothing() -> None:
    table, reverse = parse(LINES)
    assert table["东京"] == "tokyo" and reverse["tokyo"] == "东京"
    assert table["多伦多"] == "toronto"
    assert table["花生"] == "peanut" and reverse["peanut"] == "花生"
    assert set(table["跑步"].split()) == {"walk", "quick", "march", "run"}
    assert "说明书" not in table


def test_glossing_counts_the_words_a_term_glosses() -> None:
    table, _ = parse(LINES)
    counts = glossing(table)
    assert counts["tokyo"] == 1 and counts["peanut"] == 1
