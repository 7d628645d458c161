"""Typed database errors that routes map to HTTP statuses."""


class NotFound(LookupError):
    """The row asked for does not exist (404)."""


class Conflict(RuntimeError):
    """The write clashes with what is stored (409). The message is English (API, logs); the
    optional ``code`` and ``values`` let the dashboard word it in the reader's language."""

    def __init__(self, message: str, code: str | None = None, **values: object) -> None:
        super().__init__(message)
        self.code = code
        self.values = values


class DatabaseUnavailable(RuntimeError):
    """The database cannot be reached right now, or is turned off (503); ``code`` is the API
    error code."""

    def __init__(self, message: str = "", code: str = "database_unavailable") -> None:
        super().__init__(message)
        self.code = code
