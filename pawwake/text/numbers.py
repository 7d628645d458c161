"""Whole numbers typed into URLs, queries and forms: plain ASCII digits only.

``str.isdigit()`` is true for '²' and other digits that ``int()`` refuses (a check then a
parse that answered 500), and ``int()`` alone takes '٣', ' 7', '+7' and '1_0'. Every id,
page or count read from text goes through ``whole_number``.
"""

from __future__ import annotations

MAX_DIGITS = 18  # fits PostgreSQL's bigint


def whole_number(text: object, *, max_digits: int = MAX_DIGITS) -> int | None:
    """``text`` as an int when it is 1 to ``max_digits`` ASCII digits, else None."""
    if isinstance(text, str) and 0 < len(text) <= max_digits and text.isascii() \
            and text.isdigit():
        return int(text)
    return None


def number_or_text(text: str) -> int | str:
    """A form field meant as a number (``-`` allowed): the int when it is one, else the text
    as typed, for the field's own parser to refuse in its words."""
    number = whole_number(text.removeprefix("-"))
    if number is None:
        return text
    return -number if text.startswith("-") else number
