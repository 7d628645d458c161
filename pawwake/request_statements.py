"""Every request's database statements are bounded (``db/statement_bounds.py``).

The root app's middleware runs for every request of every surface (the dashboard and ``GET /``
included): the statements a request runs, and the work it starts meanwhile (the turn stored
after a reply), may each take ``REQUEST_STATEMENT_SECONDS``. One stopped there raises
``StatementTimeout``, answered 503 ``database_timeout``: a slow request, not a database that
went away (the health state keeps saying it is there).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from pawwake.db.statement_bounds import REQUEST_STATEMENT_SECONDS, statements_bounded

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def bounded_statements_middleware(request: web.Request, handler: Handler
                                        ) -> web.StreamResponse:
    with statements_bounded(REQUEST_STATEMENT_SECONDS):
        return await handler(request)
