"""The /dashboard sub-app: password login, pages and htmx partials."""

from __future__ import annotations

from aiohttp import web


def setup_dashboard(app: web.Application) -> None:
    """Mount the dashboard under /dashboard."""
