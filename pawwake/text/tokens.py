"""Tokenising Chinese and English for keyword search: index terms and query keywords.

jieba is loaded once per process (about 1 s), only when memory or recall needs it, with its
cache file kept in the data folder; its dictionary and idf table are held lean
(``text.dictionary``: ~60 MB resident rather than ~110 MB, cuts and weights unchanged).

jieba's HMM guessing of unknown words is off on both sides (``HMM=False``): on short chat
text it glued a pronoun to its verb ("我开", "我想养") and cut "做后端" as "做后" + "端", so the
noun a query was about never became a keyword. Names it would have guessed are still found
through the single characters stored with every word.

Input is bounded: cutting takes about 10 microseconds per character, so a pasted book would hold
a thread for seconds. A long text is indexed from its first ``INDEX_HEAD_CHARS`` and last
``INDEX_TAIL_CHARS`` characters (about 80 ms at most), a query's keywords come from its first
``QUERY_HEAD_CHARS`` and last ``QUERY_TAIL_CHARS`` (where a message usually asks). Callers on
the event loop go through ``pawwake.text.offload``.
"""

from __future__ import annotations

import logging
import math
import re
import threading
from collections import Counter
from functools import lru_cache, partial
from pathlib import Path

import numpy as np

from pawwake.text import dictionary, english, lexicon

log = logging.getLogger(__name__)

_DATA = Path(__file__).with_name("data")
_LEADING_TIMESTAMP = re.compile(
    r"^\s*[\[【(（]?\s*\d{4}[-/.年]\d{1,2}[-/.月]\d{1,2}日?"
    r"(?:[ T]\d{1,2}:\d{2}(?::\d{2})?)?\s*[\]】)）]?\s*[:：-]?\s*")
_HAN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_DIGITS = re.compile(r"\d{4,}")
_TOKEN_EDGE = re.compile(r"^[\W_]+|[\W_]+$")

_lock = threading.Lock()
_loaded = False

INDEX_HEAD_CHARS = 6000
INDEX_TAIL_CHARS = 2000
QUERY_HEAD_CHARS = 1000
QUERY_TAIL_CHARS = 3000


def _word_list(name: str) -> list[str]:
    """The words of ``data/NAME``, one a line, lower-cased; ``#`` lines are comments."""
    lines = (_DATA / name).read_text(encoding="utf-8").splitlines()
    return [w.strip().lower() for w in lines if w.strip() and not w.startswith("#")]


STOPWORDS = frozenset(_word_list("stopwords.txt"))
# question frame words, English ones as index terms (compared after normalisation)
FRAME_WORDS = frozenset(w if _HAN.search(w) else (english.normalise(w) or w)
                        for w in _word_list("frame_words.txt"))
_idf = dictionary.IdfTable({}, {}, np.zeros(0), 10.0)


def load(data_dir: str | Path | None = None) -> None:
    """Initialise jieba (dictionary, user dictionary, idf table). Blocking; call off the loop.

    jieba's own loader keeps a zero-valued ``FREQ`` entry for every prefix of every word only
    so that ``get_DAG`` knows when to stop; we load the words alone and give the tokenizer a
    ``get_DAG`` that stops by word length instead (~10 MB less; cuts identical, ~5% slower).
    Words must not be added to jieba after this (``long_prefixes`` would not know them).
    """
    global _loaded, _idf
    if _loaded:
        return
    with _lock:
        if _loaded:
            return
        import jieba

        jieba.setLogLevel(logging.WARNING)
        package = Path(jieba.__file__).parent
        _idf = dictionary.IdfTable.read(package / "analyse" / "idf.txt")
        cache_dir = None
        if data_dir is not None:
            cache_dir = Path(data_dir).expanduser().resolve()
            cache_dir.mkdir(parents=True, exist_ok=True)
        tokenizer = jieba.dt
        words = Path(tokenizer.dictionary or package / jieba.DEFAULT_DICT_NAME)
        tokenizer.FREQ, tokenizer.total = dictionary.words_of(words, cache_dir)
        tokenizer.initialized = True
        with (_DATA / "userdict.txt").open("rb") as user_words:
            tokenizer.load_userdict(user_words)
        for word in [w for w, frequency in tokenizer.FREQ.items() if not frequency]:
            del tokenizer.FREQ[word]  # prefixes add_word put back for the user words
        tokenizer.long_prefixes = dictionary.long_prefixes(tokenizer.FREQ)
        tokenizer.get_DAG = partial(dictionary.word_graph, tokenizer)
        lexicon.load(cache_dir, tokenizer.FREQ)
        _loaded = True
        log.info("tokenizer loaded")


def has_han(text: str) -> bool:
    """Whether ``text`` holds a Chinese character."""
    return _HAN.search(text) is not None


def is_loaded() -> bool:
    return _loaded


def strip_timestamp(text: str) -> str:
    """Drop a leading date/time stamp such as ``[2025-01-02 10:00]`` that carries no meaning."""
    return _LEADING_TIMESTAMP.sub("", text, count=1)


def bounded(text: str, head: int, tail: int) -> str:
    """``text`` when at most ``head + tail`` characters, else its first ``head`` and last
    ``tail`` characters joined by a line break (so no word spans the cut)."""
    if len(text) <= head + tail:
        return text
    return text[:head] + "\n" + text[len(text) - tail:]


def _segments(text: str) -> list[str]:
    import jieba

    load()
    words: list[str] = jieba.lcut(text, cut_all=False, HMM=False)
    return words


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
    """English words normalised by ``english.terms`` (stemmed, stopwords and possessives
    dropped) and digit runs of 4+."""
    return english.terms(text) + _DIGITS.findall(text)


def han_characters(terms: list[str]) -> list[str]:
    """The single characters of multi-character Chinese terms (stopword characters left out),
    stored as index terms so a one-character query such as "猫" finds "猫叫" or "橘猫"."""
    return [ch for term in terms if len(term) > 1 for ch in term
            if _HAN.match(ch) and ch not in STOPWORDS]


def index_terms(text: str) -> list[str]:
    """Distinct terms stored with a row for indexed keyword matching.

    Precise-mode words plus the sub-words jieba's search mode finds inside long words, so a
    query for "牙医" still matches a row that says "看牙医", plus their single characters
    (``han_characters``); English terms are normalised as on the query side. A long text is
    indexed from its bounded part (see the module docstring).
    """
    import jieba

    body = strip_timestamp(bounded(text, INDEX_HEAD_CHARS, INDEX_TAIL_CHARS))
    load()
    tokens = jieba.lcut(body, cut_all=False, HMM=False) + jieba.lcut_for_search(body, HMM=False)
    han = _han_terms(tokens)
    terms = han + han_characters(han) + latin_terms(body)
    return list(dict.fromkeys(terms))


@lru_cache(maxsize=2048)
def _query_keywords(text: str, top_k: int) -> tuple[str, ...]:
    body = strip_timestamp(text)
    han = _han_terms(_segments(body))
    latin = list(dict.fromkeys(latin_terms(body)))
    if any(t not in FRAME_WORDS for t in [*han, *latin]):  # the frame only when nothing else
        han = [t for t in han if t not in FRAME_WORDS]
        latin = [t for t in latin if t not in FRAME_WORDS]
    if any(len(t) >= 2 for t in han):
        han = [t for t in han if len(t) >= 2]  # single characters only when nothing better
    counts = Counter(han)
    total = sum(counts.values()) or 1
    idf = _idf.weights(list(counts), _idf.median)
    ranked = sorted(counts, key=lambda w: (-(counts[w] / total) * idf[w], w))
    return tuple(dict.fromkeys(ranked[:top_k] + _sub_words(body, ranked[:top_k]) + latin))


def _sub_words(body: str, words: list[str]) -> list[str]:
    """The dictionary words jieba's search mode finds inside the query's longer words (as the
    index side stores them), so "咖啡豆" also looks for "咖啡" and "几公里" for "公里"."""
    import jieba

    chosen = set(words)
    inner = [w for w in _han_terms(jieba.lcut_for_search(body, HMM=False)) if len(w) >= 2]
    return [w for w in inner if w not in chosen and w not in FRAME_WORDS
            and any(w in word for word in chosen)]


@lru_cache(maxsize=2048)
def _unknown_runs(text: str) -> tuple[str, ...]:
    runs, current = [], ""
    for token in _segments(strip_timestamp(text)):
        word = token.strip()
        if len(word) == 1 and _HAN.match(word) and word not in STOPWORDS:
            current += word
            continue
        if len(current) > 1:
            runs.append(current)
        current = ""
    if len(current) > 1:
        runs.append(current)
    return tuple(dict.fromkeys(runs))


def unknown_runs(text: str) -> list[str]:
    """Runs of two or more single Chinese characters the dictionary could not join into a
    word (with HMM off, mostly names: "林晓" is cut as 林 + 晓), as the characters' text.
    ``query_keywords`` keeps single characters only when nothing longer is there, so a name
    next to ordinary words would otherwise not be searched at all."""
    return list(_unknown_runs(bounded(text, QUERY_HEAD_CHARS, QUERY_TAIL_CHARS)))


def keywords_and_runs(text: str, top_k: int = 10) -> tuple[list[str], list[str]]:
    """``query_keywords`` and ``unknown_runs`` of one text, in one call."""
    return query_keywords(text, top_k), unknown_runs(text)


def query_keywords(text: str, top_k: int = 10) -> list[str]:
    """Keywords of a search query: TF-IDF top ``top_k`` Chinese words plus English/number terms,
    without the question's frame words (``FRAME_WORDS``: "几月", "哪个", "suggest") unless
    nothing else is left: no memory holds them, and as rare words they outweighed what the
    question is about ("我的生日是几月几号？" held 生日 for a quarter of its keyword weight)."""
    return list(_query_keywords(bounded(text, QUERY_HEAD_CHARS, QUERY_TAIL_CHARS), top_k))


# An English term's weight in the language falls with how many dictionary words it glosses
# (``lexicon.glossed_words``): a name or "cilantro" (1) weighs about as a rare Chinese word,
# "time" (440) as a common one, so a question's few specific words carry its evidence.
ENGLISH_MOST = 11.5
ENGLISH_SLOPE = 1.1
ENGLISH_LEAST = 4.0


def language_weights(keywords: list[str]) -> dict[str, float]:
    """How specific each keyword is in its language, whatever is stored: jieba's IDF for a
    Chinese word (a name such as "豆豆" ~9.4, "最近" 5.8, an unknown word the table's
    median), for other terms one that falls with how common the term is (``ENGLISH_MOST``).
    The store's own IDF says little with a handful of memories; this says the same at every
    size."""
    han = [k for k in keywords if _HAN.search(k)]
    found = _idf.weights(han, _idf.median) if han else {}
    return {k: found[k] if k in found else english_weight(k) for k in keywords}


def english_weight(term: str) -> float:
    common = lexicon.glossed_words(term)
    return max(ENGLISH_LEAST, ENGLISH_MOST - ENGLISH_SLOPE * math.log1p(common))


def cross_terms(keywords: list[str]) -> dict[str, list[str]]:
    """For each query keyword, the other language's index terms that count as finding it
    (``lexicon``): English terms for a Chinese word, common Chinese words for an English term."""
    found = {}
    for word in keywords:
        other = (lexicon.english_terms(word) if _HAN.search(word)
                 else lexicon.chinese_words(word))
        other = [t for t in other if t != word and t not in STOPWORDS]
        if other:
            found[word] = other
    return found


def idf_weight(document_count: int, term_frequency: int) -> float:
    """Keyword weight of a term over a collection: ``ln((N+1)/(df+1)) + 1``."""
    return math.log((document_count + 1) / (term_frequency + 1)) + 1.0
