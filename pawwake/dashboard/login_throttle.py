"""The login throttle: failed sign-ins per client, so guessing is slow and bounded.

Failures are counted in the database when there is one, so every gateway process behind a load
balancer judges a client by all of its failures, and the gate that slows a distributed guesser
is one for the fleet. This process also keeps its own count, which decides alone while the
database cannot be asked (the dashboard stays usable during an outage, and says so in the log).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections import deque
from dataclasses import dataclass

import aiopg

from pawwake.db import login_failures as db
from pawwake.db.pool import cursor, transaction

log = logging.getLogger(__name__)

DB_TIMEOUT_SECONDS = 3.0  # a sign-in never waits long on a database that is away
DB_RETRY_SECONDS = 15.0  # after a failure, sign-ins do not wait on the database again this soon


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
        self._db_quiet_until = 0.0  # monotonic time before which the database is not asked

    @staticmethod
    def _key(client: LoginClient) -> str:
        return f"device:{client.device}" if client.device else f"address:{client.address}"

    def _keys_of_failure(self, client: LoginClient) -> list[str]:
        """A failure counts against the address, and against the browser when it is known."""
        keys = [f"address:{client.address}"]
        if client.device is not None:
            keys.append(self._key(client))
        return keys

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

    async def wait_seconds(self, pool: aiopg.Pool | None, client: LoginClient) -> float:
        """Seconds until ``client`` may try again (0: it may try now, and this uses its turn)."""
        if self._database_usable(pool):
            assert pool is not None
            try:
                return await asyncio.wait_for(self._fleet_wait(pool, client),
                                              DB_TIMEOUT_SECONDS)
            except Exception as exc:  # the count of this process still holds
                self._database_failed(exc)
        return self._local_wait(client)

    async def failed(self, pool: aiopg.Pool | None, client: LoginClient) -> None:
        now = time.monotonic()
        for key in self._keys_of_failure(client):
            self._record(key, now)
        self._all.append(now)
        if self._database_usable(pool):
            assert pool is not None
            try:
                await asyncio.wait_for(self._record_in_database(pool, client),
                                       DB_TIMEOUT_SECONDS)
            except Exception as exc:
                self._database_failed(exc)
        await asyncio.sleep(self.delay_seconds)

    async def succeeded(self, pool: aiopg.Pool | None, client: LoginClient) -> None:
        """A right password clears the browser's own count; the address keeps its failures."""
        if client.device is None:
            return
        self._failures.pop(self._key(client), None)
        if self._database_usable(pool):
            assert pool is not None
            try:
                await asyncio.wait_for(self._forget_in_database(pool, self._key(client)),
                                       DB_TIMEOUT_SECONDS)
            except Exception as exc:
                self._database_failed(exc)

    def _local_wait(self, client: LoginClient) -> float:
        now = time.monotonic()
        wait = self._locked_for(self._key(client), now)
        if wait > 0 or client.device is not None:
            return wait
        if self._under_attack(now):
            if now < self._next_open:
                return self._next_open - now
            self._next_open = now + self.global_interval
        return 0.0

    async def _fleet_wait(self, pool: aiopg.Pool, client: LoginClient) -> float:
        async with cursor(pool) as cur:
            ages = await db.recent_failure_ages(cur, _hashed(self._key(client)),
                                                self.window_seconds, self.max_failures)
            if len(ages) >= self.max_failures:
                return max(0.0, self.window_seconds - ages[-1])
            if client.device is not None:
                return 0.0
            if not await db.failures_reach(cur, self.window_seconds, self.global_failures):
                return 0.0
            return await db.take_gate(cur, self.global_interval)

    async def _record_in_database(self, pool: aiopg.Pool, client: LoginClient) -> None:
        async with transaction(pool) as cur:
            await db.record_failure(cur, [_hashed(k) for k in self._keys_of_failure(client)],
                                    self.window_seconds)

    async def _forget_in_database(self, pool: aiopg.Pool, key: str) -> None:
        async with cursor(pool) as cur:
            await db.forget_client(cur, _hashed(key))

    def _database_usable(self, pool: aiopg.Pool | None) -> bool:
        return pool is not None and time.monotonic() >= self._db_quiet_until

    def _database_failed(self, exc: BaseException) -> None:
        self._db_quiet_until = time.monotonic() + DB_RETRY_SECONDS
        log.warning("could not share dashboard sign-in failures through the database (%s); "
                    "this process's own count decides meanwhile", type(exc).__name__)

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


def _hashed(key: str) -> str:
    """Only a hash of the address or browser id is stored."""
    return hashlib.sha256(b"pawwake-login\x00" + key.encode("utf-8")).hexdigest()
