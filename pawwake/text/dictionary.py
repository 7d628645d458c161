"""jieba's dictionary and idf table, held lean: about 60 MB resident instead of the ~110 MB of
jieba's own loader plus an idf dict, with cuts and weights unchanged.

The dictionary is read without the zero-valued entry jieba keeps for every prefix of every
word (``read_words``), cached in the data folder (``words_of``), and walked by a word graph
that stops by word length instead (``word_graph``, on ``long_prefixes``). The idf table, read
by our own code so no file handle is left open, is held as numpy arrays (``IdfTable``).
``text.tokens`` loads them into jieba; ``bench/memory_rss.py`` measures the gateway's
resident memory.
"""

from __future__ import annotations

import contextlib
import logging
import marshal
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

_CACHE_NAME = "jieba.cache"
_CACHE_HEADER = b"pawwake jieba words 1\n"


class IdfTable:
    """jieba's idf table (270k words) held as numpy arrays instead of a dict: the dict took
    ~39 MB resident (a str and a float object per word), this takes ~4 MB. Per word length, a
    sorted fixed-width array of the words and, in the same order, indexes into the few
    thousand distinct float64 values, so every lookup returns exactly the value in the file."""

    def __init__(self, words: dict[int, np.ndarray], codes: dict[int, np.ndarray],
                 values: np.ndarray, median: float) -> None:
        self._words = words
        self._codes = codes
        self._values = values
        self.median = median

    @classmethod
    def read(cls, path: Path) -> IdfTable:
        """Parse ``word value`` lines; a word listed twice keeps its last value."""
        by_length: dict[int, tuple[list[str], list[float]]] = {}
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                word, _, value = line.rstrip("\n").rpartition(" ")
                if word:
                    words, numbers = by_length.setdefault(len(word), ([], []))
                    words.append(word)
                    numbers.append(float(value))
        every = np.fromiter((n for _, numbers in by_length.values() for n in numbers),
                            dtype=np.float64)
        median = float(np.sort(every)[len(every) // 2]) if len(every) else 10.0
        values = np.unique(every)
        table_words: dict[int, np.ndarray] = {}
        table_codes: dict[int, np.ndarray] = {}
        for length, (words, numbers) in by_length.items():
            array = np.array(words, dtype=f"<U{length}")
            order = np.argsort(array, kind="stable")
            array = array[order]
            last = np.append(array[1:] != array[:-1], True)  # the last of equal neighbours
            codes = np.searchsorted(values, np.asarray(numbers, dtype=np.float64)[order])
            table_words[length] = array[last]
            table_codes[length] = codes[last].astype(np.min_scalar_type(len(values)))
        return cls(table_words, table_codes, values, median)

    def weights(self, words: list[str], default: float) -> dict[str, float]:
        """The value of each word (``default`` when absent): one search per word length."""
        found = dict.fromkeys(words, default)
        by_length: dict[int, list[str]] = {}
        for word in found:
            by_length.setdefault(len(word), []).append(word)
        for length, group in by_length.items():
            table = self._words.get(length)
            if table is None:
                continue
            wanted = np.array(group, dtype=f"<U{length}")
            at = np.minimum(np.searchsorted(table, wanted), len(table) - 1)
            hits = table[at] == wanted
            values = self._values[self._codes[length][at]]
            for word, hit, value in zip(group, hits.tolist(), values.tolist(), strict=True):
                if hit:
                    found[word] = value
        return found


def read_words(path: Path) -> tuple[dict[str, int], int]:
    """Words and frequency total of a jieba dictionary, as jieba itself reads it (a word listed
    again takes its last frequency; every listed frequency counts in the total) but without
    the zero-valued entry jieba adds for every prefix of every word (149k of 498k entries)."""
    words: dict[str, int] = {}
    total = 0
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, 1):
            line = raw.strip().decode("utf-8")
            try:
                word, count = line.split(" ")[:2]
                frequency = int(count)
            except ValueError:
                raise ValueError(f"invalid dictionary entry in {path} at line {number}") from None
            total += frequency
            if frequency:
                words[word] = frequency
            else:
                words.pop(word, None)
    return words, total


def words_of(path: Path, cache_dir: Path | None) -> tuple[dict[str, int], int]:
    """The dictionary from the cache in the data folder when it was made from this very file;
    read and cached otherwise (reading takes ~0.6 s, the cache ~0.2 s). A cache jieba itself
    wrote under the same name lacks our header and is simply replaced."""
    import jieba

    stat = path.stat()
    key = (jieba.__version__, str(path), stat.st_size, stat.st_mtime_ns)
    cache = cache_dir / _CACHE_NAME if cache_dir is not None else None
    if cache is not None and cache.is_file():
        try:
            with cache.open("rb") as handle:
                if handle.read(len(_CACHE_HEADER)) == _CACHE_HEADER and marshal.load(handle) == key:
                    words, total = marshal.load(handle)
                    return words, total
        except (OSError, EOFError, ValueError, TypeError):
            log.warning("the tokenizer cache is unreadable; rebuilding it")
    words, total = read_words(path)
    if cache is not None:
        _write_cache(cache, key, words, total)
    return words, total


def _write_cache(cache: Path, key: tuple[Any, ...], words: dict[str, int], total: int) -> None:
    handle, temporary = tempfile.mkstemp(dir=cache.parent, prefix=".jieba-")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(_CACHE_HEADER)
            marshal.dump(key, out)
            marshal.dump((words, total), out)
        os.replace(temporary, cache)
    except OSError as exc:
        log.warning("could not write the tokenizer cache: %s", type(exc).__name__)
        with contextlib.suppress(OSError):
            os.unlink(temporary)


def long_prefixes(words: dict[str, int]) -> dict[str, int]:
    """For each two-character start of a word of 3+ characters, the longest such word's
    length. The key objects of two-character words are reused, so only the 64k starts that
    are not words themselves cost a new string."""
    longest: dict[str, int] = {}
    for word in words:
        if len(word) > 2 and len(word) > longest.get(word[:2], 0):
            longest[word[:2]] = len(word)
    shared = {word: longest[word] for word in words if len(word) == 2 and word in longest}
    for start, length in longest.items():
        if start not in shared:
            shared[start] = length
    return shared


def word_graph(tokenizer: Any, sentence: str) -> dict[int, list[int]]:
    """jieba's ``get_DAG`` (for each position, the end positions of dictionary words starting
    there) without prefix entries in ``FREQ``: words of 1-2 characters are looked up directly,
    longer ones only after a two-character start of some longer word, up to its length."""
    words = tokenizer.FREQ
    longer = tokenizer.long_prefixes
    graph = {}
    last = len(sentence) - 1
    for start in range(last):
        pair = sentence[start:start + 2]
        ends = [start] if pair[0] in words else []
        if pair in words:
            ends.append(start + 1)
        reach = longer.get(pair)
        if reach:
            for end in range(start + 2, min(last + 1, start + reach)):
                if sentence[start:end + 1] in words:
                    ends.append(end)
        graph[start] = ends or [start]
    if last >= 0:
        graph[last] = [last]
    return graph
