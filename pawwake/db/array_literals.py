"""Id and text lists sent to PostgreSQL as one array literal each.

psycopg2 adapts a Python list element by element: about 1.3 µs an id, and about 1.5 µs a text
(each goes through our ``str`` adapter, ``db/text_params.py``). A memory search's statements
carry the keyword candidates' hundred ids two or three times each, and its keyword statement
the query's terms four times (a hundred or more texts). Adapted one by one, they cost the event
loop about a millisecond per search. ``IdArray`` writes the ids as ``'{1,2,3}'`` in one join;
``TextArray`` writes the texts as one quoted ``{"a","b"}`` literal. The statement casts each
(``%(ids)s::bigint[]``, ``%(terms)s::text[]``).

Nothing but digits reaches the SQL from an ``IdArray``: each id goes through
``operator.index`` (an integer, or a TypeError). A ``TextArray`` escapes each element for the
array syntax (backslash, double quote), and the whole literal is quoted like any other text
parameter, after the same cleaning (no NUL, no lone surrogate).
"""

from __future__ import annotations

import operator
from collections.abc import Iterable

from psycopg2.extensions import QuotedString, register_adapter

from pawwake.db.text_params import adapt_text


class IdArray:
    """Ids for a ``::bigint[]`` parameter; its own psycopg2 adapter (``getquoted``)."""

    __slots__ = ("_quoted",)

    def __init__(self, ids: Iterable[int]) -> None:
        self._quoted = ("'{" + ",".join([str(operator.index(i)) for i in ids]) + "}'").encode("ascii")

    def getquoted(self) -> bytes:
        return self._quoted


class TextArray:
    """Texts for a ``::text[]`` parameter (an element that is not a ``str`` is a TypeError)."""

    __slots__ = ("literal",)

    def __init__(self, texts: Iterable[str]) -> None:
        items = list(texts)
        body = '","'.join(items)  # TypeError for an element that is not a str
        # Only the separators' quotes, no backslash: nothing to escape (the usual case).
        if body.count('"') != 2 * (len(items) - 1) or "\\" in body:
            body = '","'.join([t.replace("\\", "\\\\").replace('"', '\\"') for t in items])
        self.literal = '{"' + body + '"}' if items else "{}"


def _adapt_texts(value: TextArray) -> QuotedString:
    return adapt_text(value.literal)


register_adapter(IdArray, lambda value: value)
register_adapter(TextArray, _adapt_texts)
