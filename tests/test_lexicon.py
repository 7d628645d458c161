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


def test_a_two_term_first_sense_names_its_word_under_each_term_by_frequency() -> None:
    """"younger sister" is how CC-CEDICT says 妹妹: "Which city does my younger sister live
    in?" must meet "用户的妹妹住在杭州" with no model set; three-term glosses name nothing."""
    lines = [
        "妹妹 妹妹 [mei4 mei5] /younger sister/young woman/",
        "姊妹 姊妹 [zi3 mei4] /sisters/",
        "姐妹 姐妹 [jie3 mei4] /sister/",
        "修女 修女 [xiu1 nu:3] /nun/sister/",
        "日語 日语 [Ri4 yu3] /Japanese language/",
        "小姑子 小姑子 [xiao3 gu1 zi5] /husband's younger sister/",
    ]
    frequency = {"妹妹": 900, "姐妹": 500, "姊妹": 50, "修女": 10, "日语": 80, "小姑子": 5}
    _, reverse = parse(lines, frequency)
    assert reverse["sister"].split() == ["妹妹", "姐妹", "姊妹"]  # the most frequent first
    assert reverse["younger"] == "妹妹"
    assert reverse["japanes"] == "日语"
    assert "小姑子" not in " ".join(reverse.values())
