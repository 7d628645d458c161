"""Id and text lists go to PostgreSQL as one array literal each (``db/array_literals.py``): the
same values come back, an empty list is an empty array, nothing but an integer gets into an id
array, and a text array's elements arrive whatever they hold."""

from __future__ import annotations

import numpy as np
import pytest

from pawwake.db.array_literals import IdArray, TextArray
from pawwake.db.pool import create_pool, cursor


async def test_ids_arrive_as_the_bigint_array_they_were(database_url: str) -> None:
    ids = [1, 42, 2**62, -7, *np.arange(100, 110).tolist()]
    pool = await create_pool(database_url, maxsize=1)
    try:
        async with cursor(pool) as cur:
            await cur.execute("SELECT %s::bigint[], %s::bigint[], 42 = ANY(%s::bigint[])",
                              (IdArray(ids), IdArray([]), IdArray(iter(ids))))
            sent, empty, found = await cur.fetchone()
    finally:
        pool.close()
        await pool.wait_closed()
    assert (sent, empty, found) == (ids, [], True)


@pytest.mark.parametrize("bad", ["1}'; DROP TABLE memories; --", 1.5, None])
def test_anything_but_an_integer_is_refused(bad: object) -> None:
    with pytest.raises((TypeError, ValueError)):
        IdArray([1, bad])  # type: ignore[list-item]


# What the array syntax and SQL quoting give a meaning to, what a keyword list really holds
# (Chinese, stems), and what PostgreSQL cannot store (NUL, a lone surrogate: cleaned as any
# text parameter is).
AWKWARD = ['"', "\\", '\\"', "a,b", "{x}", "NULL", "", " spaced ", "it's", "'); DROP TABLE x; --",
           "100%", "%(terms)s", "豆豆", "柯基犬", "newspap", "tab\there", "line\nbreak", "😀"]


async def test_texts_arrive_as_the_text_array_they_were(database_url: str) -> None:
    pool = await create_pool(database_url, maxsize=1)
    try:
        async with cursor(pool) as cur:
            await cur.execute(
                "SELECT %(all)s::text[], %(none)s::text[], '豆豆' = ANY(%(all)s::text[]),"
                " cardinality(%(all)s::text[]), %(dirty)s::text[]",
                {"all": TextArray(AWKWARD), "none": TextArray([]),
                 "dirty": TextArray(["a\x00b", "x\ud800y"])})
            sent, empty, found, count, cleaned = await cur.fetchone()
    finally:
        pool.close()
        await pool.wait_closed()
    assert (sent, empty, found, count) == (AWKWARD, [], True, len(AWKWARD))
    assert cleaned == ["ab", "x\ufffdy"]


@pytest.mark.parametrize("bad", [None, 1, b"bytes"])
def test_anything_but_a_text_is_refused(bad: object) -> None:
    with pytest.raises(TypeError):
        TextArray(["a", bad])  # type: ignore[list-item]
