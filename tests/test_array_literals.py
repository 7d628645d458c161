"""Id lists go to PostgreSQL as one array literal (``db/id_arrays.py``): the same ids come
back, an empty list is an empty array, and nothing but an integer gets into the SQL."""

from __future__ import annotations

import numpy as np
import pytest

from pawwake.db.id_arrays import IdArray
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
