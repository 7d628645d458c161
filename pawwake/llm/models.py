"""The model list of the configured provider (OpenRouter, OpenAI, Google, any compatible API)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from dataclasses import dataclass
from typing import Any

import aiohttp
from yarl import URL

log = logging.getLogger(__name__)

CACHE_SECONDS = 300.0
FETCH_TIMEOUT = aiohttp.ClientTimeout(total=10, sock_connect=5)
MAX_BODY_BYTES = 32 * 1024 * 1024


class ModelsUnavailable(RuntimeError):
    """The provider did not give a usable model list; the message is safe to show."""


@dataclass(frozen=True)
class ModelList:
    models: list[dict[str, Any]]  # {"id", "name", "context_length"?}, sorted by id
    source: str  # "openrouter" | "openai" | "google" | "openai-compatible"

    def as_json(self) -> dict[str, Any]:
        return {"data": self.models, "source": self.source}


def provider_of(api_base: str) -> str:
    """Which provider a base URL belongs to, from its host."""
    host = (URL(api_base).host or "").lower()
    if host == "openrouter.ai" or host.endswith(".openrouter.ai"):
        return "openrouter"
    if host == "generativelanguage.googleapis.com":
        return "google"
    if host == "api.openai.com":
        return "openai"
    return "openai-compatible"


def models_url(api_base: str) -> str:
    """``/models`` next to the chat endpoint; Google's OpenAI-compatible one lives under /openai."""
    base = api_base.rstrip("/")
    if provider_of(base) == "google" and not base.endswith("/openai"):
        base += "/openai"
    return base + "/models"


def parse_models(payload: Any) -> list[dict[str, Any]]:
    """Read the ``data`` list every OpenAI-style provider returns, tolerating their extras."""
    items = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(items, list):
        raise ModelsUnavailable("the provider's answer has no model list")
    models: dict[str, dict[str, Any]] = {}
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("id"), str):
            continue
        model_id = item["id"].strip().removeprefix("models/")
        if not model_id:
            continue
        name = item.get("name") or item.get("display_name") or model_id
        entry: dict[str, Any] = {"id": model_id, "name": str(name)}
        context = item.get("context_length") or item.get("context_window")
        if isinstance(context, int) and not isinstance(context, bool) and context > 0:
            entry["context_length"] = context
        models[model_id] = entry
    return sorted(models.values(), key=lambda m: m["id"].lower())


class ModelCatalog:
    """Fetches model lists and keeps each for a few minutes, per base URL and key."""

    def __init__(self, *, cache_seconds: float = CACHE_SECONDS) -> None:
        self.cache_seconds = cache_seconds
        self._cache: dict[tuple[str, str], tuple[float, ModelList]] = {}
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}

    async def list_models(self, http: aiohttp.ClientSession, api_base: str,
                          api_key: str) -> ModelList:
        """The provider's models; raises ModelsUnavailable with a message free of secrets."""
        url = models_url(api_base)
        cache_key = (url, hashlib.sha256(api_key.encode("utf-8")).hexdigest())
        lock = self._locks.setdefault(cache_key, asyncio.Lock())
        async with lock:  # one fetch at a time per provider; the others read its result
            cached = self._cache.get(cache_key)
            if cached is not None and time.monotonic() - cached[0] < self.cache_seconds:
                return cached[1]
            result = ModelList(await _fetch(http, url, api_key), provider_of(api_base))
            self._cache[cache_key] = (time.monotonic(), result)
            return result

    async def list_for(self, http: aiohttp.ClientSession, settings: Any) -> ModelList:
        """The models of the provider that ``settings`` (API_BASE_URL, API_KEY) points at."""
        return await self.list_models(http, settings.api_base, settings["API_KEY"])

    def clear(self) -> None:
        self._cache.clear()


async def _fetch(http: aiohttp.ClientSession, url: str, api_key: str) -> list[dict[str, Any]]:
    host = URL(url).host or "the provider"
    headers = {"Accept": "application/json", "Accept-Encoding": "identity"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    try:
        async with http.get(url, headers=headers, timeout=FETCH_TIMEOUT) as response:
            if response.status != 200:
                log.warning("model list from %s answered HTTP %s", host, response.status)
                raise ModelsUnavailable(f"{host} answered HTTP {response.status}")
            body = bytearray()
            async for chunk in response.content.iter_chunked(64 * 1024):
                body += chunk
                if len(body) > MAX_BODY_BYTES:
                    raise ModelsUnavailable(f"{host} sent a model list that is too large")
    except TimeoutError:
        raise ModelsUnavailable(f"{host} did not answer in time") from None
    except aiohttp.ClientError as exc:
        log.warning("model list from %s failed: %s", host, type(exc).__name__)
        raise ModelsUnavailable(f"could not reach {host}") from None
    try:
        payload = json.loads(body)
    except ValueError:
        raise ModelsUnavailable(f"{host} did not answer with JSON") from None
    return parse_models(payload)
