"""Milliseconds per search step, for the benchmark and debug logs."""

from __future__ import annotations

import time
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


class StepClock:
    """Milliseconds spent per step, for the benchmark and debug logs. Sequential steps are
    laps; ``keyword_fetch`` and the ``embed_*`` parts run side by side within ``retrieve``."""

    def __init__(self) -> None:
        self.laps: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.laps[name] = self.laps.get(name, 0.0) + (now - self._last) * 1000.0
        self._last = now

    async def timed(self, name: str, step: Awaitable[T]) -> T:
        start = time.perf_counter()
        try:
            return await step
        finally:
            self.laps[name] = (time.perf_counter() - start) * 1000.0

    def __str__(self) -> str:
        return " ".join(f"{name}={ms:.1f}" for name, ms in self.laps.items())
