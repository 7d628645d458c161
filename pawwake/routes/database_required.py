"""/api routes whose service needs the database answer 503 while it is turned off."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable

from aiohttp import web

from pawwake.app_faces import DATABASE, face_of
from pawwake.db.errors import DatabaseUnavailable

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def database_required(feature: str) -> Callable[[Handler], Handler]:
    """Refuse with ``DatabaseUnavailable`` (503, rendered by the sub-app's error middleware)
    when DATABASE_ENABLED=false; ``feature`` names what needs it, for the message."""

    def decorate(handler: Handler) -> Handler:
        @functools.wraps(handler)
        async def wrapper(request: web.Request) -> web.StreamResponse:
            if face_of(request, DATABASE) is None:
                raise DatabaseUnavailable(
                    f"{feature} need the database (DATABASE_ENABLED=false).")
            return await handler(request)

        return wrapper

    return decorate
