"""Typed application keys: every piece of shared state on the app has one here."""

from __future__ import annotations

from typing import TYPE_CHECKING

import aiohttp
from aiohttp import web

if TYPE_CHECKING:
    from pawwake.config import RuntimeConfig
    from pawwake.database import Database
    from pawwake.tasks import BackgroundTasks

SETTINGS = web.AppKey("settings", object)  # the start-up Settings snapshot (env + defaults)
CONFIG: web.AppKey[RuntimeConfig] = web.AppKey("config")
DATABASE: web.AppKey[Database | None] = web.AppKey("database")
HTTP: web.AppKey[aiohttp.ClientSession] = web.AppKey("http")
TASKS: web.AppKey[BackgroundTasks] = web.AppKey("tasks")
