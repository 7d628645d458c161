"""Tokenising Chinese and English for keyword search: index terms and query keywords.

jieba is loaded once per process (about 0.6 s and ~200 MB), only when memory or recall needs
it, with its cache file kept in the data folder. TF-IDF weights come from jieba's bundled idf
table, read by our own code so no file handle is left open.
"""

from __future__ import annotations

import logging
import math
import re
import threading
from collections import Counter
from functools import lru_cache
from pathlib import Path

log = logging.getLogger(__name__)

_DATA = Path(__file__).with_name("data")
_LEADING_TIMESTAMP = re.compile(
    r"^\s*[\[【(（]?\s*\d{4}[-/.年]\d{1,2}[-/.月]\d{1,2}日?"
    r"(?:[ T]\d{1,2}:\d{2}(?::\d{2})?)?\s*[\]】)）]?\s*[:：-]?\s*")
_HAN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_ENGLISH = re.compile(r"[A-Za-z][A-Za-z'\-]*[A-Za-z]|[A-Za-z]{2,}")
_DIGITS = re.compile(r"\d{4,}")
_TOKEN_EDGE = re.compile(r"^[\W_]+|[\W_]+$")

_lock = threading.Lock()
_loaded = False
_idf: dict[str, float] = {}
_median_idf = 10.0


def _stopwords() -> frozenset[str]:
    words = (_DATA / "stopwords.txt").read_text(encoding="utf-8").split()
    return frozenset(w.strip().lower() for w in words if w.strip())


STOPWORDS = _stopwords()


def load(data_dir: str | Path | None = None) -> None:
    """Initialise jieba (dictionary, user dictionary, idf table). Blocking; call off the loop."""
    global _loaded, _median_idf
    if _loaded:
        return
    with _lock:
        if _loaded:
            return
        import jieba

        jieba.setLogLevel(logging.WARNING)
        if data_dir is not None:
            cache_dir = Path(data_dir).expanduser().resolve()
            cache_dir.mkdir(parents=True, exist_ok=True)
            jieba.dt.tmp_dir = str(cache_dir)
            jieba.dt.cache_file = "jieba.cache"
        jieba.initialize()
        with (_DATA / "userdict.txt").open("rb") as user_words:
            jieba.load_userdict(user_words)
        idf_path = Path(jieba.__file__).with_name("analyse") / "idf.txt"
        with idf_path.open(encoding="utf-8") as handle:
            for line in handle:
                word, _, value = line.rstrip("\n").rpartition(" ")
                if word:
                    _idf[word] = float(value)
        values = sorted(_idf.values())
        _median_idf = values[len(values) // 2] if values else 10.0
        _loaded = True
        log.info("tokenizer loaded")


def is_loaded() -> bool:
    return _loaded


def strip_timestamp(text: str) -> str:
    """Drop a leading date/time stamp such as ``[2025-01-02 10:00]`` that carries no meaning."""
    return _LEADING_TIMESTAMP.sub("", text, count=1)


def _segments(text: str) -> list[str]:
    import jieba

    load()
    return jieba.lcut(text, cut_all=False)


def _clean(token: str) -> str:
    return _TOKEN_EDGE.sub("", token.strip()).lower()


def _han_terms(tokens: list[str]) -> list[str]:
    terms = []
    for token in tokens:
        word = _clean(token)
        if word and _HAN.search(word) and word not in STOPWORDS:
            terms.append(word)
    return terms


def latin_terms(text: str) -> list[str]:
    """English words of 2+ letters (stopwords dropped) and digit runs of 4+, lower-cased."""
    words = [w.lower() for w in _ENGLISH.findall(text)]
    terms = [w for w in words if len(w) >= 2 and w not in STOPWORDS]
    return terms + _DIGITS.findall(text)


def index_terms(text: str) -> list[str]:
    """Distinct terms stored with a row for indexed keyword matching.

    Precise-mode words plus the sub-words jieba's search mode finds inside long words, so a
    query for "牙医" still matches a row that says "看牙医".
    """
    import jieba

    body = strip_timestamp(text)
    load()
    tokens = jieba.lcut(body, cut_all=False) + jieba.lcut_for_search(body)
    terms = _han_terms(tokens) + latin_terms(body)
    return list(dict.fromkeys(terms))


@lru_cache(maxsize=2048)
def _query_keywords(text: str, top_k: int) -> tuple[str, ...]:
    body = strip_timestamp(text)
    han = _han_terms(_segments(body))
    if any(len(t) >= 2 for t in han):
        han = [t for t in han if len(t) >= 2]  # single characters only when nothing better
    counts = Counter(han)
    total = sum(counts.values()) or 1
    ranked = sorted(counts, key=lambda w: (-(counts[w] / total) * _idf.get(w, _median_idf), w))
    latin = list(dict.fromkeys(latin_terms(body)))
    return tuple(dict.fromkeys(ranked[:top_k] + latin))


def query_keywords(text: str, top_k: int = 10) -> list[str]:
    """Keywords of a search query: TF-IDF top ``top_k`` Chinese words plus English/number terms."""
    return list(_query_keywords(text, top_k))


def idf_weight(document_count: int, term_frequency: int) -> float:
    """Keyword weight of a term over a collection: ``ln((N+1)/(df+1)) + 1``."""
    return math.log((document_count + 1) / (term_frequency + 1)) + 1.0
