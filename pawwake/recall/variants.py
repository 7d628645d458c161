"""Other words for a question's keywords, from the bundled lexicon (CC-CEDICT): a message that
says "scared" answers "afraid", one that says 恐高 answers 害怕.

The lexicon links Chinese words with English glosses; two hops give a keyword's neighbours in
its own language: an English term's Chinese words' other glosses ("afraid" -> 怕, 害怕 ->
fear, dread, scare), a Chinese word's glosses' other Chinese words (害怕 -> afraid, scare ->
怕, 恐, 吓). Glosses shared by many words ("like", "make") say nothing and are left out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pawwake.text import lexicon, tokens

PER_KEYWORD = 6  # most variants of one keyword
MOST_GLOSSED = 40  # an English gloss of more dictionary words than this is too general


def variants(keywords: Sequence[str]) -> dict[str, list[str]]:
    """For each keyword, the index terms of its language the lexicon gives the same sense
    (none for single Chinese characters: they are parts of too many words)."""
    found: dict[str, list[str]] = {}
    taken = set(keywords)
    for word in keywords:
        if tokens.has_han(word):
            if len(word) < 2:
                continue
            hops = [c for term in _specific(lexicon.english_terms(word))
                    for c in lexicon.chinese_words(term)]
        else:
            hops = _specific(e for c in lexicon.chinese_words(word)
                             for e in lexicon.english_terms(c))
        kept = [h for h in dict.fromkeys(hops) if h not in taken][:PER_KEYWORD]
        if kept:
            found[word] = kept
    return found


def _specific(terms: Iterable[str]) -> list[str]:
    """The English terms specific enough to stand for a sense (not "be", "like", "do")."""
    return [t for t in terms if len(t) > 2 and t not in tokens.STOPWORDS
            and lexicon.glossed_words(t) <= MOST_GLOSSED]
