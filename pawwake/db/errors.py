"""Typed database errors that routes map to HTTP statuses."""


class NotFound(LookupError):
    """The row asked for does not exist (404)."""


class Conflict(RuntimeError):
    """The write clashes with what is stored (409)."""


class DatabaseUnavailable(RuntimeError):
    """The database cannot be reached right now (503)."""
