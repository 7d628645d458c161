"""The login throttle: failed sign-ins per client, so guessing is slow and bounded."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True)
class LoginClient:
    """Who is trying to sign in: the real address (an IPv6 /64 counts as one) and, for a browser
    that has signed in before, its device id from a cookie only this server can make."""

    address: str
    device: str | None


class LoginThrottle:
    """Failed logins per client: a short pause after each, a lock-out after many.

    A browser that signed in before (device cookie) is judged by its own failures only, so a
    guesser behind the same NAT or proxy cannot lock it out. Everyone else is judged by the
    failures from their address. When failures pile up from many addresses at once, attempts
    without a device cookie are let through one per ``global_interval`` seconds, which bounds
    a distributed guesser without locking out known browsers.
    """

    def __init__(self, *, max_failures: int = 8, window_seconds: float = 15 * 60,
                 delay_seconds: float = 0.5, max_clients: int = 10_000,
                 global_failures: int = 100, global_interval: float = 2.0) -> None:
        self.max_failures = max_failures
        self.window_seconds = window_seconds
        self.delay_seconds = delay_seconds
        self.max_clients = max_clients
        self.global_failures = global_failures
        self.global_interval = global_interval
        self._failures: dict[str, deque[float]] = {}
        self._all: deque[float] = deque(maxlen=global_failures)
        self._next_open = 0.0

    @staticmethod
    def _key(client: LoginClient) -> str:
        return f"device:{client.device}" if client.device else f"address:{client.address}"

    def _recent(self, key: str, now: float) -> deque[float]:
        failures = self._failures.get(key, deque())
        while failures and now - failures[0] > self.window_seconds:
            failures.popleft()
        return failures

    def _locked_for(self, key: str, now: float) -> float:
        failures = self._recent(key, now)
        if len(failures) < self.max_failures:
            return 0.0
        return max(0.0, self.window_seconds - (now - failures[-self.max_failures]))

    def _under_attack(self, now: float) -> bool:
        return (len(self._all) >= self.global_failures
                and now - self._all[0] <= self.window_seconds)

    def wait_seconds(self, client: LoginClient) -> float:
        """Seconds until ``client`` may try again (0: it may try now, and this uses its turn)."""
        now = time.monotonic()
        wait = self._locked_for(self._key(client), now)
        if wait > 0 or client.device is not None:
            return wait
        if self._under_attack(now):
            if now < self._next_open:
                return self._next_open - now
            self._next_open = now + self.global_interval
        return 0.0

    async def failed(self, client: LoginClient) -> None:
        now = time.monotonic()
        self._record(f"address:{client.address}", now)
        if client.device is not None:
            self._record(self._key(client), now)
        self._all.append(now)
        await asyncio.sleep(self.delay_seconds)

    def succeeded(self, client: LoginClient) -> None:
        """A right password clears the browser's own count; the address keeps its failures."""
        if client.device is not None:
            self._failures.pop(self._key(client), None)

    def tracked_clients(self) -> int:
        return len(self._failures)

    def _record(self, key: str, now: float) -> None:
        if len(self._failures) >= self.max_clients and key not in self._failures:
            self._forget_oldest(now)
        failures = self._recent(key, now)
        failures.append(now)
        self._failures[key] = failures

    def _forget_oldest(self, now: float) -> None:
        for key in [k for k in self._failures if not self._recent(k, now)]:
            del self._failures[key]
        while len(self._failures) >= self.max_clients:
            del self._failures[next(iter(self._failures))]
