"""The model list of the configured provider (OpenRouter, OpenAI, Google, any compatible API)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from yarl import URL

from pawwake.settings import Settings

log = logging.getLogger(__name__)

CACHE_SECONDS = 300.0
FAILURE_BACKOFF_SECONDS = 45.0  # a failed provider is asked again by /v1/models after this
QUICK_WAIT_SECONDS = 4.0  # a slow provider must not hold up a client's model picker
FETCH_TIMEOUT = aiohttp.ClientTimeout(total=10, sock_connect=5)
MAX_BODY_BYTES = 32 * 1024 * 1024


class ModelsUnavailable(RuntimeError):
    """The provider did not give a usable model list; the message is safe to show. ``code``
    and ``values`` let the dashboard say it in the reader's language."""

    def __init__(self, message: str, code: str = "no_list", **values: object) -> None:
        super().__init__(message)
        self.code = code
        self.values = values


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


# MEMORY_MODEL left empty: a small, cheap model of the provider in use (extraction runs after
# every round or every few; on DEFAULT_MODEL it cost as much as the chat itself). A provider we
# know no model of (a relay, Ollama) gets DEFAULT_MODEL: a guessed name would fail each call.
CHEAP_MEMORY_MODELS = {"openrouter": "anthropic/claude-haiku-4.5", "openai": "gpt-4.1-mini",
                       "google": "gemini-2.5-flash-lite"}


def memory_model(settings: Settings) -> str:
    """The model for extraction, scoring and consolidation: MEMORY_MODEL, else a cheap
    built-in default of the provider at API_BASE_URL, else DEFAULT_MODEL."""
    if settings.MEMORY_MODEL:
        return settings.MEMORY_MODEL
    return CHEAP_MEMORY_MODELS.get(provider_of(settings.api_base), settings.DEFAULT_MODEL)


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


@dataclass
class _Provider:
    """What the catalog knows about one provider (base URL and key)."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    last_good: ModelList | None = None
    fetched_at: float = -math.inf
    retry_after: float = -math.inf  # quick answers do not ask the provider before this


class ModelCatalog:
    """Fetches model lists and keeps each for a few minutes, per base URL and key.

    A failure is remembered for ``failure_backoff`` seconds: quick answers (``/v1/models``,
    asked by every client's model picker) then come from the last good list at once instead of
    waiting on a provider that is down again and again.
    """

    def __init__(self, *, cache_seconds: float = CACHE_SECONDS,
                 failure_backoff: float = FAILURE_BACKOFF_SECONDS,
                 quick_wait: float = QUICK_WAIT_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.cache_seconds = cache_seconds
        self.failure_backoff = failure_backoff
        self.quick_wait = quick_wait
        self.clock = clock
        self._providers: dict[tuple[str, str], _Provider] = {}

    def _provider(self, url: str, api_key: str) -> _Provider:
        cache_key = (url, hashlib.sha256(api_key.encode("utf-8")).hexdigest())
        return self._providers.setdefault(cache_key, _Provider())

    def _fresh(self, provider: _Provider) -> bool:
        return (provider.last_good is not None
                and self.clock() - provider.fetched_at < self.cache_seconds)

    async def list_models(self, http: aiohttp.ClientSession, api_base: str,
                          api_key: str) -> ModelList:
        """The provider's models; raises ModelsUnavailable with a message free of secrets.

        Asks the provider whenever the cached list is old, even during a back-off: this is the
        explicit request (the dashboard's model picker), and its success ends the back-off.
        """
        url = models_url(api_base)
        provider = self._provider(url, api_key)
        async with provider.lock:  # one fetch at a time per provider; the others read its result
            if self._fresh(provider):
                assert provider.last_good is not None
                return provider.last_good
            try:
                models = await _fetch(http, url, api_key)
            except ModelsUnavailable:
                provider.retry_after = self.clock() + self.failure_backoff
                raise
            provider.last_good = ModelList(models, provider_of(api_base))
            provider.fetched_at = self.clock()
            provider.retry_after = -math.inf
            return provider.last_good

    async def list_quickly(self, http: aiohttp.ClientSession, api_base: str,
                           api_key: str) -> ModelList | None:
        """The models as soon as possible: the cached list, else the provider's answer within
        ``quick_wait`` seconds, else the last good list (None when there never was one)."""
        url = models_url(api_base)
        provider = self._provider(url, api_key)
        if self._fresh(provider):
            return provider.last_good
        if self.clock() < provider.retry_after:
            return provider.last_good
        if provider.lock.locked() and provider.last_good is not None:
            return provider.last_good  # someone is refreshing it; the old list will do
        try:
            async with asyncio.timeout(self.quick_wait):
                return await self.list_models(http, api_base, api_key)
        except TimeoutError:
            provider.retry_after = self.clock() + self.failure_backoff
            log.warning("model list from %s took over %gs; not asked again for %gs",
                        URL(url).host, self.quick_wait, self.failure_backoff)
        except ModelsUnavailable:
            pass  # logged by the fetch; the back-off is set
        return provider.last_good

    async def list_for(self, http: aiohttp.ClientSession, settings: Settings) -> ModelList:
        """The models of the provider that ``settings`` (API_BASE_URL, API_KEY) points at."""
        return await self.list_models(http, settings.api_base, settings.API_KEY)

    async def quick_for(self, http: aiohttp.ClientSession, settings: Settings) -> ModelList | None:
        """``list_quickly`` for the provider that ``settings`` points at."""
        return await self.list_quickly(http, settings.api_base, settings.API_KEY)

    def clear(self) -> None:
        self._providers.clear()


async def fetch_models(http: aiohttp.ClientSession, api_base: str, api_key: str
                       ) -> list[dict[str, Any]]:
    """The provider's model list asked once, uncached (the settings page's connection test:
    values typed but not saved); raises ModelsUnavailable with a message free of the key."""
    return await _fetch(http, models_url(api_base), api_key)


async def _fetch(http: aiohttp.ClientSession, url: str, api_key: str) -> list[dict[str, Any]]:
    host = URL(url).host or "the provider"
    headers = {"Accept": "application/json", "Accept-Encoding": "identity"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    try:
        async with http.get(url, headers=headers, timeout=FETCH_TIMEOUT) as response:
            if response.status != 200:
                log.warning("model list from %s answered HTTP %s", host, response.status)
                raise ModelsUnavailable(f"{host} answered HTTP {response.status}", "http_status",
                                        host=host, status=response.status)
            body = bytearray()
            async for chunk in response.content.iter_chunked(64 * 1024):
                body += chunk
                if len(body) > MAX_BODY_BYTES:
                    raise ModelsUnavailable(f"{host} sent a model list that is too large",
                                            "too_large", host=host)
    except TimeoutError:
        raise ModelsUnavailable(f"{host} did not answer in time", "timeout", host=host) from None
    except aiohttp.ClientError as exc:
        log.warning("model list from %s failed: %s", host, type(exc).__name__)
        raise ModelsUnavailable(f"could not reach {host}", "unreachable", host=host) from None
    try:
        payload = json.loads(body)
    except ValueError:
        raise ModelsUnavailable(f"{host} did not answer with JSON", "not_json",
                                host=host) from None
    return parse_models(payload)
