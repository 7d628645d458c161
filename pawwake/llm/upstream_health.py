"""The last failed answer from the provider, kept in memory for the status page.

Only the time, status, model and a short error code are kept: never bodies, which may echo
the request or carry secrets.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime


@dataclass(frozen=True)
class UpstreamError:
    at: datetime
    status: int
    model: str
    code: str


class UpstreamHealth:
    """The last upstream failure and the last success after it (process-local)."""

    def __init__(self) -> None:
        self.last_error: UpstreamError | None = None
        self.last_ok_at: datetime | None = None

    def failed(self, status: int, model: str, code: str) -> None:
        self.last_error = UpstreamError(datetime.now(UTC), int(status), model[:200], code[:60])

    def succeeded(self) -> None:
        self.last_ok_at = datetime.now(UTC)

    def state(self) -> str:
        """``ok``, ``warning`` (failed before, answered since) or ``error`` (last call failed)."""
        if self.last_error is None:
            return "ok"
        if self.last_ok_at is not None and self.last_ok_at > self.last_error.at:
            return "warning"
        return "error"
