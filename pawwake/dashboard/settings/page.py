"""The settings page: grouped settings saved with htmx (or a plain form), and the model list."""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import web

from pawwake.app_faces import CHAT, CONFIG, HTTP, MODELS, face_of, settings_of
from pawwake.dashboard.i18n import request_language, translate
from pawwake.dashboard.refusals import PageRefusal, setting_error_text
from pawwake.dashboard.render import is_htmx, render
from pawwake.dashboard.settings.form import form_changes, groups_view, submitted_values
from pawwake.dashboard.settings.probe import test_connection
from pawwake.llm.models import ModelsUnavailable
from pawwake.settings import GROUPS
from pawwake.settings.entry import SettingError

log = logging.getLogger(__name__)


def with_persona_placeholder(groups: list[dict[str, Any]], persona: str | None) -> None:
    """An empty SYSTEM_PROMPT box shows the persona in force (system_prompt.txt) as its
    placeholder, so the user sees what the gateway sends today."""
    for group in groups:
        for row in group["fields"]:
            if row["name"] == "SYSTEM_PROMPT" and persona:
                row["placeholder"] = persona


def _persona_file(request: web.Request) -> str | None:
    return face_of(request, CHAT).persona.read()


async def settings_page(request: web.Request) -> web.Response:
    config = face_of(request, CONFIG)
    await settings_of(request)  # starts a re-read of saved values when due
    lang = request_language(request)
    groups = groups_view(config.public_view(), lang)
    with_persona_placeholder(groups, _persona_file(request))
    saved = request.query.get("saved")
    for group in groups:
        if group["id"] == saved:
            group["message"] = translate(lang, "settings.saved")
    return render(request, "dashboard/settings.html", {"groups": groups})


async def save_settings(request: web.Request) -> web.Response:
    """Save one group's changed fields through ``RuntimeConfig.update`` (all or nothing)."""
    lang = request_language(request)
    form = await request.post()
    group_id = form.get("_group")
    if group_id not in GROUPS:
        raise PageRefusal("settings.error", message=translate(lang, "settings.bad_group"))
    config = face_of(request, CONFIG)
    current = await settings_of(request)
    submitted = submitted_values(form)
    changes = form_changes(current, submitted)
    # Every bad field is marked at once, not only the first.
    parsed, refused = config.check(changes)
    errors = {exc.name: setting_error_text(lang, exc) for exc in refused}
    applied = sorted(parsed)
    if not errors:
        try:
            await config.update(changes)
        except SettingError as exc:  # refused on the second look (a secret changed meanwhile)
            errors[exc.name] = setting_error_text(lang, exc)
    if errors:
        separator = "；" if lang == "zh" else "; "
        message = translate(lang, "settings.error", message=separator.join(
            f"{name}: {text}" for name, text in errors.items()))
    else:
        if applied:
            log.info("settings saved in the dashboard: %s", ", ".join(applied))
        message = translate(lang, "settings.saved" if applied else "settings.unchanged")
        if not is_htmx(request):  # a plain form: post, redirect, get
            location = request.app.router["settings"].url_for().with_query(saved=group_id)
            raise web.HTTPSeeOther(f"{location}#group-{group_id}")
    # On an error the form shows what was typed, so nothing is lost.
    groups = groups_view(config.public_view(), lang,
                         submitted=submitted if errors else None, errors=errors)
    with_persona_placeholder(groups, _persona_file(request))
    group = next(g for g in groups if g["id"] == group_id)
    group["error" if errors else "message"] = message
    return render(request, "dashboard/settings.html", {"groups": groups, "group": group},
                  fragment="partials/_settings_group.html", status=400 if errors else 200)


async def models(request: web.Request) -> web.Response:
    """The provider's models: datalist options for htmx, a table as a page."""
    settings = await settings_of(request)
    catalog = face_of(request, MODELS)
    context: dict[str, Any] = {"models": [], "source": None, "error": None}
    status = 200
    try:
        found = await catalog.list_for(face_of(request, HTTP).session, settings)
    except ModelsUnavailable as exc:
        context["error"] = translate(request_language(request), f"models_error.{exc.code}",
                                     **exc.values)
        status = 502
    else:
        context.update(models=found.models, source=found.source)
    return render(request, "dashboard/models.html", context,
                  fragment="partials/_model_options.html", status=status)


def setup(dashboard: web.Application) -> None:
    dashboard.router.add_get("/settings", settings_page, name="settings")
    dashboard.router.add_post("/settings", save_settings, name="settings_save")
    dashboard.router.add_post("/settings/test-connection", test_connection, name="settings_test")
    dashboard.router.add_get("/models", models, name="models")
