"""HTTP routes for programs: parse and validate input, call a service, shape the response."""

from __future__ import annotations

from aiohttp import web

from pawwake.routes import health


def setup_routes(app: web.Application) -> None:
    health.setup(app)
