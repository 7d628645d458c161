"""Job errors in the reader's words: every text the job handlers write lands in its kind, an
unknown one still reads as a sentence, and every kind is worded in both languages."""

from __future__ import annotations

import pytest

from pawwake.dashboard.i18n import LANGUAGES, STRINGS, translate
from pawwake.dashboard.job_errors import _KINDS, _WHO, explain_job_error

# (stored text, kind, whose call, status): the texts of memory/extraction/job.py,
# memory/consolidation/drafts.py, search/embedding_sweep.py, llm/embeddings/api.py, jobs.py,
# db/jobs.py and partition/rotation.py, as they write them.
KNOWN = [
    ("memory model rate limited (429)", "rate_limited", "memory", ""),
    ("memory model test/m rate limited (429)", "rate_limited", "memory", ""),
    ("memory model test/m answered 502", "upstream_status", "memory", "502"),
    ("memory model test/m unreachable: UpstreamTimeout", "unreachable", "memory", ""),
    ("memory model test/m answer was truncated (raise MEMORY_MAX_TOKENS)", "truncated",
     "memory", ""),
    ("memory model test/m answer unusable: Expecting value: line 1 column 1 (char 0)",
     "bad_answer", "memory", ""),
    ("extraction was taken over by another run", "taken_over", "provider", ""),
    ("memory model answered 503", "upstream_status", "memory", "503"),
    ("memory model unreachable (upstream_unreachable)", "unreachable", "memory", ""),
    ("The memory model kept answering 429 (rate limited); try again later.", "rate_limited",
     "memory", "429"),
    ("embedding settings changed during the backfill", "settings_changed", "embedding", ""),
    ("the embedding provider changed its answer size", "settings_changed", "embedding", ""),
    ("embedding API rate limit (HTTP 429)", "rate_limited", "embedding", "429"),
    ("embedding API unreachable (ClientConnectorError)", "unreachable", "embedding", ""),
    ("embedding API answered HTTP 401: invalid key", "upstream_status", "embedding", "401"),
    ("embedding API answered with malformed vectors", "bad_answer", "embedding", ""),
    ("the worker running it stopped before it finished", "interrupted", "provider", ""),
    ("OperationalError: server closed the connection unexpectedly", "database", "provider", ""),
    ("UpstreamStatusError: upstream answered 500", "upstream_status", "provider", "500"),
]


@pytest.mark.parametrize(("raw", "kind", "who", "status"), KNOWN)
def test_each_known_error_lands_in_its_kind(raw: str, kind: str, who: str, status: str) -> None:
    shown = explain_job_error(raw)
    assert shown is not None
    assert (shown.kind, shown.who, shown.status, shown.raw) == (kind, who, status, raw)


def test_unknown_errors_still_read_as_a_sentence_and_nothing_is_nothing() -> None:
    bug = explain_job_error("KeyError: 'candidate_id'")
    assert bug is not None and (bug.kind, bug.name) == ("exception", "KeyError")
    odd = explain_job_error("  something else entirely \n")
    assert odd is not None and (odd.kind, odd.raw) == ("other", "something else entirely")
    assert explain_job_error(None) is None and explain_job_error("  ") is None
    summary = explain_job_error("UpstreamStatusError: upstream answered 429", "summary")
    assert summary is not None and (summary.kind, summary.who) == ("rate_limited", "summary")


@pytest.mark.parametrize("lang", LANGUAGES)
def test_every_kind_is_worded_in_both_languages(lang: str) -> None:
    kinds = {kind for kind, _ in _KINDS} | {"exception", "other"}
    for kind in kinds:
        assert f"job_error.{kind}" in STRINGS[lang], kind
    for who in {name for _, name in _WHO} | {"provider"}:
        assert f"job_error_who.{who}" in STRINGS[lang], who
    shown = explain_job_error("memory model rate limited (429)")
    assert shown is not None
    text = translate(lang, "job_error.rate_limited",
                     who=translate(lang, "job_error_who.memory"))
    assert "429" in text and ("记忆模型" if lang == "zh" else "memory model") in text
