"""The provider's last failed answer per kind of call, kept in memory for the status page.

Chats and the gateway's own calls (memory extraction, summaries, consolidation, scoring) are
kept apart: a memory model that is rate limited while chats go through is still a provider
problem, and the page must say so rather than "no failure" beside "memory extraction failing".
Only the time, status, model and a short error code are kept: never bodies, which may echo
the request or carry secrets.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

CHAT = "chat"  # the clients' chats and the dashboard's try-it page
STATES = ("ok", "warning", "error")  # in rising order of concern


@dataclass(frozen=True)
class UpstreamError:
    at: datetime
    status: int
    model: str
    code: str


@dataclass
class CallHealth:
    """One kind of call: its last failure and the last success after it."""

    work: str
    last_error: UpstreamError | None = None
    last_ok_at: datetime | None = None

    def state(self) -> str:
        """``ok``, ``warning`` (failed before, answered since) or ``error`` (last call failed)."""
        if self.last_error is None:
            return "ok"
        if self.last_ok_at is not None and self.last_ok_at > self.last_error.at:
            return "warning"
        return "error"


class UpstreamHealth:
    """The provider's health per kind of call (``chat``, or the ``usage_type`` of the gateway's
    own calls: ``extract``, ``summary``, ``consolidate``...), process-local."""

    def __init__(self) -> None:
        self._calls: dict[str, CallHealth] = {}

    def _of(self, work: str) -> CallHealth:
        return self._calls.setdefault(work, CallHealth(work))

    def failed(self, status: int, model: str, code: str, *, work: str = CHAT) -> None:
        self._of(work).last_error = UpstreamError(datetime.now(UTC), int(status), model[:200],
                                                  code[:60])

    def succeeded(self, *, work: str = CHAT) -> None:
        self._of(work).last_ok_at = datetime.now(UTC)

    @property
    def last_error(self) -> UpstreamError | None:
        """The newest failure of any kind of call."""
        errors = [c.last_error for c in self._calls.values() if c.last_error is not None]
        return max(errors, key=lambda error: error.at, default=None)

    def calls(self) -> list[CallHealth]:
        """Every kind of call that failed since start, chats first."""
        return sorted((c for c in self._calls.values() if c.last_error is not None),
                      key=lambda c: (c.work != CHAT, c.work))

    def state(self) -> str:
        """The worst state of any kind of call."""
        return max((c.state() for c in self._calls.values()), key=STATES.index, default="ok")
