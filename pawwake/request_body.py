"""What a request body may cost before anything reads it.

No route of ours needs a compressed request body, and inflating one is how 256 KB on the wire
becomes 256 MB in memory (aiohttp inflates a body before its size limit applies). So a body
with a ``Content-Encoding`` is refused unread, on every surface (415), and the production
server does not inflate at all (``pawwake.py``): what aiohttp still reads of a refused body,
for at most 10 s so that the client can read the refusal, it reads as sent and discards. A size
cap is applied while a body is read: a ``Content-Length`` is only a claim, and a chunked body
has none.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import hdrs, web

from pawwake import keys
from pawwake.api_error import ApiError

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

IDENTITY = "identity"


class BodyTooLarge(Exception):
    """The body is over the route's limit; each route answers 413 in its own error shape."""


def content_encoding(request: web.Request) -> str | None:
    """The coding a request body says it was compressed with, or None for a plain one (no
    body, no header, or ``identity``)."""
    if not request.body_exists:
        return None
    coding = request.headers.get(hdrs.CONTENT_ENCODING, "").strip().lower()
    return coding if coding and coding != IDENTITY else None


def encoding_refusal(coding: str) -> ApiError:
    return ApiError("unsupported_content_encoding",
                    f"Request bodies are accepted uncompressed only; send it again without "
                    f"Content-Encoding (it said {coding[:40]!r}).", status=415)


@web.middleware
async def plain_bodies_middleware(request: web.Request, handler: Handler
                                  ) -> web.StreamResponse:
    """Program sub-apps: a compressed body is refused in the sub-app's error envelope, before
    the gateway key is checked (nothing is read either way)."""
    coding = content_encoding(request)
    if coding is None:
        return await handler(request)
    response = request.config_dict[keys.ERROR_ENVELOPE](encoding_refusal(coding))
    response.headers[hdrs.ACCEPT_ENCODING] = IDENTITY  # RFC 7694: what this server takes
    return response


async def read_bounded(request: web.Request, max_bytes: int) -> bytes:
    """The raw body, or BodyTooLarge as soon as it declares or turns out to be over
    ``max_bytes``: at most ``max_bytes`` plus one read chunk is ever held."""
    declared = request.content_length
    if declared is not None and declared > max_bytes:
        raise BodyTooLarge()
    body = bytearray()
    while chunk := await request.content.read(max_bytes + 1 - len(body)):
        body.extend(chunk)
        if len(body) > max_bytes:
            raise BodyTooLarge()
    return bytes(body)
