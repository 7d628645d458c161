"""English keyword normalisation: the same terms for a stored memory and for a query.

A word is lower-cased, its possessive or contraction ending dropped ("dog's" -> dog,
"what's" -> what, then dropped as a stopword), split at hyphens, and reduced to its Snowball
(Porter 2) stem, so "named" meets "name" and "peanuts" meets "peanut"; an irregular past form
is first replaced by its verb ("grew" -> grow, from ``data/irregular_en.txt``). Stopwords are checked on
the surface form and on the form without its ending, so every contraction of a stopword goes.

The stemmer is ``snowballstemmer``, the Snowball project's own pure-Python build: it installs
on any host (no compiler, no platform wheel needed) and uses PyStemmer's C code by itself when
that happens to be installed. Pure Python costs ~20 us a word; stems are cached per word, and a
user's English vocabulary is small, so a search pays almost nothing for it.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Protocol

_DATA = Path(__file__).with_name("data")
_WORD = re.compile(r"[A-Za-z]+(?:['\u2019][A-Za-z]+)*")
_ENDINGS = ("n't", "'s", "'re", "'ve", "'ll", "'d", "'m", "s'")  # s' = plural possessive


def _stopwords() -> frozenset[str]:
    lines = (_DATA / "stopwords_en.txt").read_text(encoding="utf-8").splitlines()
    return frozenset(w.strip().lower() for w in lines if w.strip() and not w.startswith("#"))


STOPWORDS = _stopwords()


def _irregular() -> dict[str, str]:
    lines = (_DATA / "irregular_en.txt").read_text(encoding="utf-8").splitlines()
    pairs = (line.split() for line in lines if line.strip() and not line.startswith("#"))
    return {form.lower(): verb.lower() for form, verb in pairs}


IRREGULAR = _irregular()  # "grew" -> "grow": Snowball only strips suffixes


def _base(word: str) -> str:
    """``word`` without a possessive or contraction ending; other apostrophes removed."""
    for ending in _ENDINGS:
        if word.endswith(ending) and len(word) > len(ending):
            word = word[: -len(ending)] + ("s" if ending == "s'" else "")
            break
    return word.replace("'", "")


@lru_cache(maxsize=8192)
def normalise(word: str) -> str | None:
    """The index term of one English word, or None for a stopword or a single letter."""
    word = word.lower().replace("\u2019", "'")
    if word in STOPWORDS:
        return None
    base = _base(word)
    if len(base) < 2 or base in STOPWORDS:
        return None
    return _stemmer().stemWord(IRREGULAR.get(base, base))


class _Stemmer(Protocol):
    """What is used of a snowballstemmer stemmer (the package has no type information)."""

    def stemWord(self, word: str) -> str: ...


@lru_cache(maxsize=1)
def _stemmer() -> _Stemmer:
    """Loaded on first use (~3 MB), so a gateway that only forwards never pays for it."""
    import snowballstemmer

    stemmer: _Stemmer = snowballstemmer.stemmer("english")
    return stemmer


def terms(text: str) -> list[str]:
    """Normalised English terms of ``text`` in order (repeats kept); a hyphenated word gives
    each of its parts."""
    return [term for word in _WORD.findall(text) if (term := normalise(word))]
