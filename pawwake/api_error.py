"""The one refusal type of the gateway's program surfaces (/api, /v1, /mcp).

Routes and services raise ``ApiError`` with an HTTP status, a snake_case code, an English
message and optional details (``field`` names the input at fault); the error middleware of the
sub-app that serves the request renders it in that sub-app's envelope (``errors.py``). It
imports nothing, so any layer may raise it.
"""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """A request refused for a reason the caller can fix or must know (400 unless ``status``).

    ``details`` go into the error body beside code and message; ``field``, when given, is one
    of them."""

    def __init__(self, code: str, message: str, *, status: int = 400, field: str | None = None,
                 **details: Any) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.details: dict[str, Any] = {"field": field, **details} if field else dict(details)
