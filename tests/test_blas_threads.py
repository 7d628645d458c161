"""numpy's BLAS runs each product on one thread in the gateway (pawwake.blas_threads)."""

from __future__ import annotations

import numpy as np

from pawwake.app import create_app
from pawwake.blas_threads import blas_threads, set_blas_threads
from pawwake.settings import Settings


def test_the_thread_count_is_set_and_read_back() -> None:
    before = blas_threads()
    assert before is not None, "numpy's wheels bring OpenBLAS: it must be found"
    try:
        assert set_blas_threads(2) == before
        assert blas_threads() == 2
        assert set_blas_threads(1) == 2
        assert blas_threads() == 1
        matrix = np.arange(12, dtype=np.float32).reshape(4, 3)
        assert (matrix @ np.ones(3, dtype=np.float32)).tolist() == [3.0, 12.0, 21.0, 30.0]
    finally:
        set_blas_threads(before)


def test_the_app_uses_one_blas_thread() -> None:
    before = set_blas_threads(2)
    try:
        create_app(Settings.from_env({}))
        assert blas_threads() == 1
    finally:
        set_blas_threads(before or 1)
