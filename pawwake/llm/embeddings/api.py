"""An OpenAI-compatible embeddings API: the request, what the server taught us (it may ignore
``dimensions``, or reject it), the probe that learns the real dimension, and clear errors (the
key never appears in one).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import numpy as np

from pawwake.llm.embeddings.provenance import EmbeddingError, Provenance, normalise_rows
from pawwake.llm.sse import TokenUsage
from pawwake.settings import Settings

log = logging.getLogger(__name__)

API_BATCH = 64
PROBE_DEADLINE = 10.0
PROBE_RETRY_SECONDS = 30.0
_NO_DIMENSIONS_STATUSES = (400, 422)

# What the embedder's owner does with the tokens an embedding API call reports (the model
# and the counts): the embedder embeds, its owner books (``memory/resources.py``).
UsageRecorder = Callable[[str, TokenUsage], Awaitable[None]]


class EmbeddingApi:
    """One per process: the HTTP client, and the servers' quirks learned so far."""

    def __init__(self, http: aiohttp.ClientSession | None,
                 usage: UsageRecorder | None = None) -> None:
        self.http = http
        self._usage = usage
        self._without_dimensions: set[tuple[str, str]] = set()
        self._learned_dim: dict[tuple[str, str, int], int] = {}
        self._probe_failures: dict[tuple[str, str, int], tuple[float, EmbeddingError]] = {}

    def provenance(self, settings: Settings) -> Provenance:
        """The provenance the API's vectors have, as far as known without calling it."""
        model, dim = settings.EMBEDDING_MODEL, int(settings.EMBEDDING_DIM)
        learned = self._learned_dim.get((api_base(settings), model, dim), dim)
        return Provenance("api", model, learned)

    async def probe(self, settings: Settings) -> None:
        """Learn the API's real dimension once (a failure is kept for a while, so a status
        page polling every second does not wait each time)."""
        key = (api_base(settings), settings.EMBEDDING_MODEL, int(settings.EMBEDDING_DIM))
        if key in self._learned_dim:
            return
        failed = self._probe_failures.get(key)
        if failed is not None and time.monotonic() - failed[0] < PROBE_RETRY_SECONDS:
            raise failed[1]
        try:
            await self.embed(settings, ["ping"], deadline=PROBE_DEADLINE)
        except EmbeddingError as exc:
            self._probe_failures[key] = (time.monotonic(), exc)
            raise
        self._probe_failures.pop(key, None)

    async def embed(self, settings: Settings, texts: list[str], *,
                    deadline: float = 60.0) -> np.ndarray:
        """One request's unit rows, in input order."""
        if self.http is None:
            raise EmbeddingError("no HTTP client for the embedding API")
        base, model = api_base(settings), settings.EMBEDDING_MODEL
        dim = int(settings.EMBEDDING_DIM)
        body: dict[str, Any] = {"model": model, "input": texts, "encoding_format": "float"}
        send_dimensions = (base, model) not in self._without_dimensions
        if send_dimensions:
            body["dimensions"] = dim
        status, payload = await self._post(settings, body, deadline)
        if status in _NO_DIMENSIONS_STATUSES and send_dimensions:
            log.info("embedding API rejected 'dimensions' (HTTP %s); retrying without it",
                     status)
            body.pop("dimensions")
            status, payload = await self._post(settings, body, deadline)
            if status == 200:
                self._without_dimensions.add((base, model))
        if status != 200:
            raise _api_failure(status, payload, settings.EMBEDDING_API_KEY)
        matrix = _vectors_from(payload, len(texts))
        self._learned_dim[(base, model, dim)] = int(matrix.shape[1])
        usage = TokenUsage.from_openai(payload.get("usage") if isinstance(payload, dict) else None)
        if usage is not None and self._usage is not None:
            await self._usage(model, usage)
        return normalise_rows(matrix)

    async def _post(self, settings: Settings, body: dict[str, Any], deadline: float
                    ) -> tuple[int, Any]:
        assert self.http is not None
        headers = {"Accept-Encoding": "identity", "Content-Type": "application/json"}
        if settings.EMBEDDING_API_KEY:
            headers["Authorization"] = f"Bearer {settings['EMBEDDING_API_KEY']}"
        url = api_base(settings) + "/embeddings"
        try:
            async with self.http.post(
                    url, json=body, headers=headers,
                    timeout=aiohttp.ClientTimeout(total=deadline, sock_connect=10)) as resp:
                raw = await resp.read()
                retry_after = resp.headers.get("Retry-After")
                status = resp.status
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise EmbeddingError(f"embedding API unreachable ({type(exc).__name__})") from None
        try:
            payload: Any = json.loads(raw) if raw else None
        except ValueError:
            payload = raw[:300].decode("utf-8", "replace")
        if status == 429:
            raise EmbeddingError("embedding API rate limit (HTTP 429)", status=429,
                                 retry_after=_seconds(retry_after))
        return status, payload


def api_base(settings: Settings) -> str:
    base = str(settings.EMBEDDING_BASE_URL).rstrip("/")
    return base[: -len("/embeddings")] if base.endswith("/embeddings") else base


def _vectors_from(payload: Any, expected: int) -> np.ndarray:
    """Rows in input order from ``{"data": [{"index", "embedding"}]}``; validates the shape."""
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, list) or len(data) != expected:
        raise EmbeddingError("embedding API answered without one vector per input")
    try:
        ordered = sorted(data, key=lambda item: int(item.get("index", 0)))
        matrix = np.asarray([item["embedding"] for item in ordered], dtype=np.float32)
    except (KeyError, TypeError, ValueError):
        raise EmbeddingError("embedding API answered with malformed vectors") from None
    if matrix.ndim != 2 or matrix.shape[1] == 0 or not np.isfinite(matrix).all():
        raise EmbeddingError("embedding API answered with malformed vectors")
    return matrix


def _api_failure(status: int, payload: Any, secret: str) -> EmbeddingError:
    detail = ""
    if isinstance(payload, dict) and isinstance(payload.get("error"), dict):
        detail = str(payload["error"].get("message") or "")
    elif isinstance(payload, str):
        detail = payload
    detail = detail[:200]
    if secret:
        detail = detail.replace(secret, "****")
    message = f"embedding API answered HTTP {status}" + (f": {detail}" if detail else "")
    return EmbeddingError(message, status=status)


def _seconds(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None
