"""The settings page's "test connection": the provider's model list asked with the values in
the form, typed but not saved. Nothing is stored, and the answer names the host and what it
said, never the key (a key left masked means the stored one)."""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import web
from yarl import URL

from pawwake.app_faces import CONFIG, HTTP, face_of, settings_of
from pawwake.dashboard.i18n import request_language, translate
from pawwake.dashboard.refusals import setting_error_text
from pawwake.dashboard.render import render
from pawwake.dashboard.settings.form import submitted_values
from pawwake.llm.models import ModelsUnavailable, fetch_models
from pawwake.settings import Settings
from pawwake.settings.entry import SettingError

log = logging.getLogger(__name__)

# What each group's test reads from its form: (base URL, key, model the test looks for).
TARGETS = {"basic": ("API_BASE_URL", "API_KEY", "DEFAULT_MODEL"),
           "vector": ("EMBEDDING_BASE_URL", "EMBEDDING_API_KEY", "EMBEDDING_MODEL")}


def _api_base(settings: Settings, url_setting: str, url: str) -> str:
    """The base to ask ``/models`` of: API_BASE_URL may be the full chat endpoint."""
    if url_setting == "API_BASE_URL":
        return settings.with_values({"API_BASE_URL": url}).api_base
    return url.rstrip("/")


async def test_connection(request: web.Request) -> web.Response:
    lang = request_language(request)
    form = await request.post()
    group = form.get("_group")
    if not isinstance(group, str) or group not in TARGETS:
        return _result(request, {"error": translate(lang, "settings.bad_group")}, 400)
    url_setting, key_setting, model_setting = TARGETS[group]
    submitted = submitted_values(form)
    current = await settings_of(request)
    config = face_of(request, CONFIG)
    asked = {name: submitted[name] for name in (url_setting, key_setting, model_setting)
             if name in submitted}
    try:
        typed = config.validate(asked)  # parsed, never stored; a kept mask drops out
    except SettingError as exc:
        return _result(request, {"error": f"{exc.name}: {setting_error_text(lang, exc)}",
                                 "probe_group": group}, 400)
    values = {name: typed.get(name, current[name])
              for name in (url_setting, key_setting, model_setting)}
    base = _api_base(current, url_setting, values[url_setting])
    host = URL(base).host or base
    try:
        models = await fetch_models(face_of(request, HTTP).session, base, values[key_setting])
    except ModelsUnavailable as exc:
        log.info("connection test: %s failed (%s)", host, exc.code)
        return _result(request, {"error": translate(lang, f"models_error.{exc.code}",
                                                    **exc.values), "probe_group": group}, 200)
    model = values[model_setting]
    context: dict[str, Any] = {
        "ok": translate(lang, "probe.ok", host=host, count=len(models)),
        "model": model,
        "model_found": any(m["id"] == model for m in models) if models else None,
        "probe_group": group,
    }
    return _result(request, context, 200)


def _result(request: web.Request, context: dict[str, Any], status: int) -> web.Response:
    return render(request, "dashboard/settings_probe.html",
                  {"ok": None, "error": None, "model": None, "model_found": None,
                   "probe_group": None, **context},
                  fragment="partials/_settings_probe.html", status=status)
