"""The forms anyone may post, signed in or not (login, language): our own small urlencoded
forms, read with a cap of a few kilobytes and a deadline. Whatever else arrives there is
refused unread."""

from __future__ import annotations

import asyncio
from urllib.parse import parse_qsl

from aiohttp import web
from multidict import MultiDict, MultiDictProxy

from pawwake.dashboard import dashboard_keys as dkeys
from pawwake.request_body import BodyTooLarge, read_bounded

# A password and a dashboard path to return to: a few hundred bytes in practice.
PUBLIC_FORM_MAX_BYTES = 8 * 1024
MAX_FIELDS = 8
# A browser sends such a form in one packet; a body trickled in a byte at a time (slowloris)
# would otherwise hold its connection for as long as the sender likes.
PUBLIC_FORM_SECONDS = 10.0
URLENCODED = "application/x-www-form-urlencoded"


class PublicFormRefused(Exception):
    """A public form that is not read: its status and the catalog key saying why."""

    def __init__(self, status: int, message_key: str) -> None:
        super().__init__(message_key)
        self.status = status
        self.message_key = message_key


async def read_public_form(request: web.Request) -> None:
    """Read and keep the form (``public_form`` gives it), or raise ``PublicFormRefused``."""
    if request.content_type != URLENCODED:
        raise PublicFormRefused(415, "error.form_type")
    try:
        async with asyncio.timeout(PUBLIC_FORM_SECONDS):
            data = await read_bounded(request, PUBLIC_FORM_MAX_BYTES)
    except BodyTooLarge:
        raise PublicFormRefused(413, "error.too_large") from None
    except TimeoutError:
        raise PublicFormRefused(408, "error.form_slow") from None
    try:
        pairs = parse_qsl(data.decode("utf-8"), keep_blank_values=True,
                          max_num_fields=MAX_FIELDS)
    except (UnicodeDecodeError, ValueError):
        raise PublicFormRefused(400, "error.bad_form") from None
    request[dkeys.PUBLIC_FORM] = MultiDictProxy(MultiDict(pairs))


def public_form(request: web.Request) -> MultiDictProxy[str]:
    """The form ``read_public_form`` read for this request (the form middleware reads it)."""
    return request[dkeys.PUBLIC_FORM]
