"""One render() for every dashboard answer: the fragment for htmx, the full page otherwise."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import aiohttp_jinja2
from aiohttp import web

from pawwake import SOURCE_URL, __version__
from pawwake.app_faces import CONFIG
from pawwake.dashboard import dashboard_keys as dkeys
from pawwake.dashboard.i18n import LANGUAGES, request_language, translator
from pawwake.dashboard.job_errors import explain_job_error
from pawwake.dashboard.nav import nav_for
from pawwake.local_time import local_iso, local_minute, zone_at, zone_label, zone_of, zoned_minute

# htmx swaps our error fragments too (they are written for it), without eval or inline styles.
HTMX_CONFIG = json.dumps({
    "allowEval": False,
    "includeIndicatorStyles": False,
    "selfRequestsOnly": True,
    "historyCacheSize": 0,
    "responseHandling": [
        {"code": "204", "swap": False},
        {"code": "[23]..", "swap": True},
        {"code": "[45]..", "swap": True, "error": True},
    ],
}, separators=(",", ":"))


def is_htmx(request: web.Request) -> bool:
    """An htmx request that wants a fragment (a history restore wants the whole page)."""
    return (request.headers.get("HX-Request") == "true"
            and request.headers.get("HX-History-Restore-Request") != "true")


def base_context(request: web.Request) -> dict[str, Any]:
    """What every template may use: language, strings, navigation, login state."""
    lang = request_language(request)
    authenticated = request.get(dkeys.AUTHENTICATED, False)
    config = request.config_dict.get(CONFIG)
    zone = zone_of(config.current()) if config is not None else zone_at(0)
    return {
        "lang": lang,
        "html_lang": "zh-CN" if lang == "zh" else "en",
        "languages": LANGUAGES,
        "t": translator(lang),
        "nav": nav_for(request) if authenticated else [],
        "authenticated": authenticated,
        "version": __version__,
        "source_url": SOURCE_URL,
        "htmx_config": HTMX_CONFIG,
        "static_url": request.config_dict[dkeys.STATIC_URL],
        "current_path": request.path_qs,
        # every shown time goes through these: TIMEZONE_HOURS, one format, and the zone said
        # beside it (``zoned_time``) or once in its column's head (``zone``)
        "zone": zone_label(zone),
        "zoned_time": lambda moment: zoned_minute(moment, zone),
        "local_time": lambda moment: local_minute(moment, zone),
        "local_iso": lambda moment: local_iso(moment, zone),
        "explain_job_error": explain_job_error,
    }


def render(request: web.Request, template: str, context: Mapping[str, Any] | None = None, *,
           fragment: str | None = None, status: int = 200,
           headers: Mapping[str, str] | None = None) -> web.Response:
    """Render ``fragment`` for htmx requests when given, else the full ``template``."""
    name = fragment if fragment is not None and is_htmx(request) else template
    response = aiohttp_jinja2.render_template(
        name, request, {**base_context(request), **(context or {})}, status=status)
    response.headers["Vary"] = "HX-Request"
    if headers:
        response.headers.update(headers)
    return response


def render_error(request: web.Request, status: int, message: str) -> web.Response:
    """An error page, or for htmx an error fragment placed in the page's flash area."""
    headers = {"HX-Retarget": "#flash", "HX-Reswap": "innerHTML"} if is_htmx(request) else None
    return render(request, "error.html", {"status": status, "message": message},
                  fragment="partials/_error.html", status=status, headers=headers)
