"""Vector text literals are formatted in one ``%`` per row (a batch is formatted on the event
loop); each element reads exactly as ``f"{x:.7g}"`` did."""

from __future__ import annotations

import numpy as np
import pytest

from pawwake.db.vector_rows import array_literal, vector_literal

RNG = np.random.default_rng(7)
VECTORS = [RNG.standard_normal(384).astype(np.float32) * scale
           for scale in (1e-9, 1e-3, 0.1, 1.0, 1e6)] + [
    np.zeros(3, np.float32), np.array([np.nan, np.inf, -np.inf, -0.0, 1.0], np.float32),
    np.zeros(0, np.float32), np.ones(1536, np.float32) / 3]


@pytest.mark.parametrize("vector", VECTORS)
def test_literals_match_per_element_formatting(vector: np.ndarray) -> None:
    elements = ",".join(f"{x:.7g}" for x in vector.tolist())
    assert array_literal(vector) == "{" + elements + "}"
    assert vector_literal(vector) == "[" + elements + "]"
