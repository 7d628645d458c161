"""GET/PUT /api/settings and GET /api/models: runtime settings and the provider's models."""

from __future__ import annotations

import logging

from aiohttp import web

from pawwake.api_error import ApiError
from pawwake.app_faces import CONFIG, HTTP, MODELS, STARTUP_SETTINGS, face_of, settings_of
from pawwake.auth import key_matches
from pawwake.live_settings import AdminOnly
from pawwake.llm.models import ModelsUnavailable
from pawwake.routes.api_body import read_json
from pawwake.settings import GROUPS
from pawwake.settings.entry import SettingError

log = logging.getLogger(__name__)


async def get_settings(request: web.Request) -> web.Response:
    """Every setting with its value in force now; secrets masked."""
    config = face_of(request, CONFIG)
    await settings_of(request)  # starts a re-read of saved values when due
    return web.json_response({"settings": config.public_view(), "groups": list(GROUPS)})


async def put_settings(request: web.Request) -> web.Response:
    """Apply a JSON object of changes: all valid and stored together, or nothing (400)."""
    changes = await read_json(request, max_bytes=None)
    if not isinstance(changes, dict):
        raise ApiError("invalid_body", "Send a JSON object of setting names to new values.")
    config = face_of(request, CONFIG)
    await settings_of(request)  # starts a re-read of saved values when due
    admin = is_admin(request)
    try:
        applied = sorted(config.validate(changes, admin=admin))
        await config.update(changes, admin=admin)
    except AdminOnly as exc:
        how = ("send X-Admin-Key with ADMIN_SECRET, or change it in the dashboard"
               if face_of(request, STARTUP_SETTINGS).ADMIN_SECRET else
               "change it in the dashboard (or set ADMIN_SECRET and send it as X-Admin-Key)")
        raise ApiError("admin_only", f"{exc.name} decides where the provider keys are sent; "
                       f"the gateway key alone cannot change it: {how}.", status=403,
                       field=exc.name) from exc
    except SettingError as exc:
        raise ApiError("invalid_setting", str(exc), field=exc.name) from exc
    if applied:
        log.info("settings saved through the API: %s", ", ".join(applied))
    return web.json_response({"updated": applied, "settings": config.public_view()})


def is_admin(request: web.Request) -> bool:
    """X-Admin-Key matches ADMIN_SECRET (in constant time); never when that is unset."""
    secret = face_of(request, STARTUP_SETTINGS).ADMIN_SECRET
    return bool(secret) and key_matches(request.headers.get("X-Admin-Key"), secret)


async def get_models(request: web.Request) -> web.Response:
    """The models the configured provider offers (cached for a few minutes)."""
    settings = await settings_of(request)
    try:
        models = await face_of(request, MODELS).list_for(face_of(request, HTTP).session, settings)
    except ModelsUnavailable as exc:
        raise ApiError("models_unavailable", f"Could not list models: {exc}",
                       status=502) from exc
    return web.json_response(models.as_json())


def setup(app: web.Application) -> None:
    app.router.add_get("/settings", get_settings, name="api_settings")
    app.router.add_put("/settings", put_settings, name="api_settings_put")
    app.router.add_get("/models", get_models, name="api_models")
