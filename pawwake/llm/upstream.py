"""Calls to the LLM provider: raw forwarding for chat clients, ``complete()`` for our own calls.

One shared ClientSession does every call. The client's key never travels upstream: the gateway
authenticates with ``API_KEY``. Failures become typed errors that routes turn into 502/504.
"""

from __future__ import annotations

import asyncio
import email.utils
import io
import json
import logging
import math
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import aiohttp
from multidict import CIMultiDict
from yarl import URL

from pawwake import SOURCE_URL
from pawwake.db.pool import DATABASE_ERRORS, cursor
from pawwake.db.usage import insert_usage
from pawwake.llm.http import upstream_timeout
from pawwake.llm.sse import TokenUsage, capture_completion
from pawwake.llm.upstream_health import UpstreamHealth
from pawwake.settings import Settings
from pawwake.text.messages import ChatMessage

log = logging.getLogger(__name__)

# Never relayed from the provider to the client: hop-by-hop headers, framing that aiohttp
# redoes itself, and headers that belong to the provider's own site.
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization",
                        "proxy-connection", "te", "trailer", "trailers", "transfer-encoding",
                        "upgrade"})
NOT_RELAYED = HOP_BY_HOP | {"content-length", "content-encoding", "set-cookie", "date", "server"}

LARGE_BODY = 1024 * 1024  # bytes; bigger bodies go out as a stream of slices

ATTRIBUTION_URL = SOURCE_URL
ATTRIBUTION_TITLE = "Pawwake"


class UpstreamFailure(Exception):
    """The provider could not be used; ``status`` and ``code`` say how to tell the client."""

    status = 502
    code = "upstream_error"


class UpstreamUnreachable(UpstreamFailure):
    status = 502
    code = "upstream_unreachable"


class UpstreamTimeout(UpstreamFailure):
    status = 504
    code = "upstream_timeout"


class UpstreamStatusError(UpstreamFailure):
    """The provider answered with a status other than 200 (for the gateway's own calls)."""

    code = "upstream_status"

    def __init__(self, status: int, body: bytes, retry_after: float | None = None) -> None:
        super().__init__(f"upstream answered {status}")
        self.status = status
        self.body = body
        self.retry_after = retry_after  # a 429's Retry-After in seconds, when it gave one


def is_openrouter(url: str) -> bool:
    host = URL(url).host or ""
    return host == "openrouter.ai" or host.endswith(".openrouter.ai")


def upstream_headers(settings: Settings, url: str) -> dict[str, str]:
    """Headers for a provider call: our key, plain JSON, no compression (bytes are relayed)."""
    headers = {"Content-Type": "application/json", "Accept-Encoding": "identity"}
    if settings.API_KEY:
        headers["Authorization"] = f"Bearer {settings.API_KEY}"
    if is_openrouter(url):
        headers["HTTP-Referer"] = ATTRIBUTION_URL
        headers["X-Title"] = ATTRIBUTION_TITLE
    return headers


def relay_headers(headers: Mapping[str, str]) -> CIMultiDict[str]:
    """The provider's response headers that may reach the client."""
    relayed: CIMultiDict[str] = CIMultiDict()
    for name, value in headers.items():
        if name.lower() not in NOT_RELAYED:
            relayed.add(name, value)
    return relayed


def _describe(exc: BaseException) -> str:
    if isinstance(exc, aiohttp.ClientConnectorError) and exc.os_error.strerror:
        return exc.os_error.strerror
    return type(exc).__name__


@asynccontextmanager
async def forward(http: aiohttp.ClientSession, settings: Settings, payload: bytes,
                  *, url: str | None = None, headers: Mapping[str, str] | None = None,
                  name: str = "upstream", detailed: bool = True
                  ) -> AsyncIterator[aiohttp.ClientResponse]:
    """POST ``payload`` to the chat completions endpoint (or ``url``, another protocol's,
    with its ``headers``); yield the response once its headers arrived. On leaving, a fully
    read response goes back to the pool; anything else (client gone, stream cut) closes the
    connection so the provider stops generating. ``name`` starts the log lines; ``detailed``
    says why a connection failed in the error too, not only in the log."""
    url = url or settings.chat_completions_url
    # Long histories are sent in slices (aiohttp yields to the loop between them).
    data = payload if len(payload) <= LARGE_BODY else io.BytesIO(payload)
    try:
        response = await http.post(url, data=data,
                                   headers=headers or upstream_headers(settings, url),
                                   timeout=upstream_timeout(settings))
    except TimeoutError as exc:
        log.warning("%s timed out before answering (%s)", name, type(exc).__name__)
        raise UpstreamTimeout("The upstream API did not answer in time.") from exc
    except (aiohttp.ClientError, OSError, ValueError) as exc:
        if not detailed:
            log.warning("%s unreachable: %s", name, type(exc).__name__)
            raise UpstreamUnreachable("Could not reach the upstream API.") from exc
        log.warning("%s unreachable: %s", name, _describe(exc))
        raise UpstreamUnreachable(
            f"Could not reach the upstream API ({_describe(exc)}).") from exc
    try:
        yield response
    finally:
        if response.content.is_eof():
            response.release()
        else:
            response.close()


async def read_body(response: aiohttp.ClientResponse) -> bytes:
    """The whole response body, with read failures typed like connect failures."""
    try:
        return await response.read()
    except TimeoutError as exc:
        log.warning("upstream stopped sending the reply body (%s)", type(exc).__name__)
        raise UpstreamTimeout("The upstream API stopped answering.") from exc
    except aiohttp.ClientError as exc:
        log.warning("upstream reply body failed: %s", type(exc).__name__)
        raise UpstreamUnreachable("The upstream API broke off its reply.") from exc


def retry_after_seconds(value: str | None, attempt: int, *, cap: float = 60.0) -> float:
    """Wait before retrying a 429: the provider's Retry-After (seconds or a date), else
    exponential backoff (1, 2, 4 ... s); never more than ``cap``."""
    wait = float(2 ** attempt)
    if value:
        value = value.strip()
        try:
            wait = float(value)
        except ValueError:
            try:
                when = email.utils.parsedate_to_datetime(value)
            except (TypeError, ValueError, IndexError):
                pass
            else:
                wait = when.timestamp() - time.time()
    return min(max(wait, 0.0), cap)


@dataclass(frozen=True)
class Completion:
    """A finished non-stream reply to one of the gateway's own calls."""

    text: str
    finish_reason: str | None
    usage: TokenUsage | None
    raw: dict[str, Any]

    @property
    def truncated(self) -> bool:
        """The model hit its output limit: callers split the work or raise the limit."""
        return self.finish_reason == "length"


@dataclass(frozen=True)
class UsageBooking:
    """Where ``complete()`` records each call: the tokens of every answer in the pool, with
    the kind of work (``token_usage.usage_type``) and the session it was for (an answer the
    caller then cannot use counts too: truncated, unparsable); and, given ``health``, whether
    the provider answered, under that kind of work, for the status page."""

    pool: Any
    usage_type: str
    session_id: str | None = None
    health: UpstreamHealth | None = None

    def provider_failed(self, status: int, model: str, code: str) -> None:
        if self.health is not None:
            self.health.failed(status, model, code, work=self.usage_type)

    def provider_answered(self) -> None:
        if self.health is not None:
            self.health.succeeded(work=self.usage_type)


UNBOOKED = UsageBooking(None, "own")  # a call that books nothing and reports no health


async def book_usage(booking: UsageBooking | None, usage: TokenUsage | None, model: str
                     ) -> None:
    """One call's tokens as a ``token_usage`` row; a database that fails is logged, since the
    call itself succeeded and its answer is kept."""
    if booking is None or booking.pool is None or usage is None:
        return
    try:
        async with cursor(booking.pool) as cur:
            await insert_usage(cur, session_id=booking.session_id, model=model,
                               prompt_tokens=usage.prompt, completion_tokens=usage.completion,
                               total_tokens=usage.total, cached_tokens=usage.cached,
                               usage_type=booking.usage_type, cost=usage.cost)
    except DATABASE_ERRORS as exc:  # the call itself succeeded: keep its answer
        log.warning("could not record %s token usage: %s", booking.usage_type,
                    type(exc).__name__)


async def complete(http: aiohttp.ClientSession, settings: Settings,
                   messages: Sequence[ChatMessage],
                   *, model: str | None = None, max_tokens: int | None = None,
                   temperature: float | None = None, extra: Mapping[str, Any] | None = None,
                   attempts: int = 4, max_wait: float = 60.0,
                   usage: UsageBooking | None = None) -> Completion:
    """One non-stream completion for extraction, summaries and the like.

    A 429 is retried up to ``attempts`` times, honouring Retry-After; any other status raises
    UpstreamStatusError. Truncation is reported (``Completion.truncated``), not raised. With
    ``usage``, the tokens of every answer that reports them are recorded here, before the
    caller looks at the answer.
    """
    body: dict[str, Any] = {"model": model or settings.DEFAULT_MODEL, "messages": messages,
                            "stream": False}
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    if temperature is not None:
        body["temperature"] = temperature
    body.update(extra or {})
    payload = json.dumps(body, ensure_ascii=False).encode("utf-8")
    booking = usage or UNBOOKED
    for attempt in range(attempts):
        try:
            async with forward(http, settings, payload) as response:
                data = await read_body(response)
                status = response.status
                retry_after = response.headers.get("Retry-After")
        except UpstreamFailure as exc:
            booking.provider_failed(exc.status, body["model"], exc.code)
            raise
        if status == 429 and attempt + 1 < attempts:
            wait = retry_after_seconds(retry_after, attempt, cap=max_wait)
            log.info("upstream rate limited (429); retrying in %.1f s", wait)
            await asyncio.sleep(wait)
            continue
        if status != 200:
            booking.provider_failed(status, body["model"],
                                    "rate_limited" if status == 429 else "upstream_status")
            raise UpstreamStatusError(
                status, data, retry_after=retry_after_seconds(retry_after, 0, cap=math.inf)
                if status == 429 and retry_after else None)
        reply = capture_completion(data)
        try:
            raw = json.loads(data)
        except ValueError:
            raw = {}
        answered_by = raw.get("model") if isinstance(raw, dict) else None
        await book_usage(usage, reply.usage, str(answered_by or body["model"]))
        if reply.error is not None:
            booking.provider_failed(status, body["model"], "upstream_error")
            raise UpstreamStatusError(status, data)
        booking.provider_answered()
        if reply.finish_reason == "length":
            log.warning("upstream reply was truncated at the output limit (model %s)",
                        body["model"])
        return Completion(text=reply.content, finish_reason=reply.finish_reason,
                          usage=reply.usage, raw=raw if isinstance(raw, dict) else {})
    raise AssertionError("unreachable: the last attempt returns or raises")
