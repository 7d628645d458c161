"""A request body read only when it fits: parsing JSON holds the event loop, so a route with a
small real need refuses a big body from its Content-Length before reading it (413)."""

from __future__ import annotations

from aiohttp import web


class BodyTooLarge(Exception):
    """The body is over the route's limit; each route answers 413 in its own error shape."""


async def read_bounded(request: web.Request, max_bytes: int) -> bytes:
    """The raw body, or BodyTooLarge when it declares or turns out to be over ``max_bytes``."""
    declared = request.content_length
    if declared is not None and declared > max_bytes:
        raise BodyTooLarge()
    data = await request.read()
    if len(data) > max_bytes:
        raise BodyTooLarge()
    return data
