"""The dashboard's navigation: one list, in display order. A new page adds one line here."""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web


@dataclass(frozen=True)
class NavItem:
    route: str  # name of the page's GET route in the dashboard sub-app
    label: str  # catalog key in i18n.STRINGS
    icon: str  # icon name in templates/partials/_icons.html


NAV: tuple[NavItem, ...] = (
    NavItem("status", "nav.status", "gauge"),
    NavItem("tryit", "nav.tryit", "sparkle"),
    NavItem("memories", "nav.memories", "memory"),
    NavItem("memories_import", "nav.import", "upload"),
    NavItem("memories_export", "nav.export", "download"),
    NavItem("conversations", "nav.conversations", "chat"),
    NavItem("threads", "nav.threads", "chat"),
    NavItem("usage", "nav.usage", "chart"),
    NavItem("jobs", "nav.jobs", "clock"),
    NavItem("settings", "nav.settings", "sliders"),
)


def nav_for(request: web.Request) -> list[dict[str, object]]:
    """The navigation with URLs resolved and the current page marked."""
    router = request.match_info.current_app.router
    current = request.match_info.route.name
    return [{"url": str(router[item.route].url_for()), "label": item.label, "icon": item.icon,
             "current": item.route == current} for item in NAV]
