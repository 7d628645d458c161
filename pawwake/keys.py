"""Typed application keys: every piece of shared state on the app has one here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

if TYPE_CHECKING:
    from pawwake.chat.pipeline import ChatResources
    from pawwake.protocols.anthropic.pipeline import MessagesResources
    from pawwake.services import Services

SERVICES: web.AppKey[Services] = web.AppKey("services")  # database, http, jobs ... (services.py)
CHAT: web.AppKey[ChatResources] = web.AppKey("chat")  # persona file, pipeline steps
MESSAGES: web.AppKey[MessagesResources] = web.AppKey("messages")  # Messages steps
