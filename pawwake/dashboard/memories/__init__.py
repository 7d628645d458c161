"""The memories page and its tools: the list and editor, row and bulk actions, merging,
organising into events (consolidation) and the embedding backfill."""

from __future__ import annotations

from aiohttp import web

from pawwake.dashboard.memories import actions, backfill, consolidation, detail, merge, page


def setup(dashboard: web.Application) -> None:
    """Register every route of the memories page, the list's own first."""
    page.setup(dashboard)
    actions.setup(dashboard)
    backfill.setup(dashboard)
    consolidation.setup(dashboard)
    merge.setup(dashboard)
    detail.setup(dashboard)
