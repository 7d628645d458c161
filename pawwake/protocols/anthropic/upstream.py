"""Where Messages requests go: the provider's Messages endpoint, its key and auth header.

``MESSAGES_BASE_URL`` empty: derived from ``API_BASE_URL``'s provider (OpenRouter serves
Messages at ``/api/v1/messages``; DeepSeek, Kimi and GLM under an ``/anthropic`` path).
``MESSAGES_API_KEY`` empty: ``API_KEY``. The key goes as ``x-api-key`` to Anthropic itself and
as Bearer elsewhere, unless ``MESSAGES_AUTH_HEADER`` says otherwise. The client's own key is
never forwarded; its ``anthropic-version`` and ``anthropic-beta`` headers are.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager

import aiohttp
from yarl import URL

from pawwake.llm.upstream import ATTRIBUTION_TITLE, ATTRIBUTION_URL, forward, is_openrouter
from pawwake.settings import Settings

DEFAULT_VERSION = "2023-06-01"
PASSED_HEADERS = ("anthropic-version", "anthropic-beta")
# Providers whose Messages endpoint is not simply ``<API base>/messages``.
_KNOWN = {
    "api.deepseek.com": "https://api.deepseek.com/anthropic/v1/messages",
    "api.moonshot.cn": "https://api.moonshot.cn/anthropic/v1/messages",
    "api.moonshot.ai": "https://api.moonshot.ai/anthropic/v1/messages",
    "open.bigmodel.cn": "https://open.bigmodel.cn/api/anthropic/v1/messages",
    "api.z.ai": "https://api.z.ai/api/anthropic/v1/messages",
    "api.anthropic.com": "https://api.anthropic.com/v1/messages",
}


def messages_url(settings: Settings) -> str:
    """The provider's Messages endpoint (a base ``…/v1`` is completed with ``/messages``)."""
    configured = str(settings.MESSAGES_BASE_URL or "").strip().rstrip("/")
    if configured:
        return configured if configured.endswith("/messages") else configured + "/messages"
    host = URL(settings.api_base).host or ""
    return _KNOWN.get(host) or settings.api_base.rstrip("/") + "/messages"


def upstream_url(settings: Settings, query_string: str, suffix: str = "") -> str:
    """The provider's endpoint (plus ``suffix``) with the client's query string (Claude Code
    adds one)."""
    url = messages_url(settings) + suffix
    if query_string:
        url += ("&" if "?" in url else "?") + query_string
    return url


def uses_x_api_key(settings: Settings, url: str) -> bool:
    choice = settings.MESSAGES_AUTH_HEADER
    if choice == "auto":
        host = URL(url).host or ""
        return host == "api.anthropic.com"
    return bool(choice == "x-api-key")


def messages_headers(settings: Settings, url: str, client: Mapping[str, str]) -> dict[str, str]:
    """Headers for a Messages call: our key, the client's Anthropic headers, plain JSON."""
    headers = {"Content-Type": "application/json", "Accept-Encoding": "identity",
               "anthropic-version": client.get("anthropic-version") or DEFAULT_VERSION}
    beta = client.get("anthropic-beta")
    if beta:
        headers["anthropic-beta"] = beta
    key = settings.MESSAGES_API_KEY or settings.API_KEY
    if key:
        if uses_x_api_key(settings, url):
            headers["x-api-key"] = key
        else:
            headers["Authorization"] = f"Bearer {key}"
    if is_openrouter(url):
        headers["HTTP-Referer"] = ATTRIBUTION_URL
        headers["X-Title"] = ATTRIBUTION_TITLE
    return headers


def forward_messages(http: aiohttp.ClientSession, settings: Settings, url: str, payload: bytes,
                     client_headers: Mapping[str, str]
                     ) -> AbstractAsyncContextManager[aiohttp.ClientResponse]:
    """POST ``payload`` to ``url`` with the Messages headers (see ``forward``)."""
    return forward(http, settings, payload, url=url,
                   headers=messages_headers(settings, url, client_headers),
                   name="messages upstream", detailed=False)
