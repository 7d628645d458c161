"""Slow clients: a request's headers and body must arrive within a bound, or the connection goes.

aiohttp bounds neither: a connection that sends its headers a byte at a time is held until the
keep-alive timeout (75 s), one that trickles its body for as long as it likes. On the public
internet that is a cheap way to hold every connection a host can take (slowloris). Here:

- Headers: the production server's connections pass through a ``HeaderDeadline`` (served by
  ``GuardedSite``), which starts a clock at a request's first byte and stops it at the blank
  line that ends its headers. Past ``REQUEST_HEADER_TIMEOUT`` seconds the client gets a 408
  and the connection is closed. An idle keep-alive connection is left to aiohttp's keep-alive
  timeout; the clock starts again after each request.
- Body: ``body_deadline_middleware`` gives a body not yet fully received
  ``REQUEST_BODY_TIMEOUT`` seconds from the end of its headers; after that, reading it raises
  ``BodyTimeout`` (a 408 in the error shape of the sub-app serving it) and the connection is
  closed once the answer is sent.

Both are a timer per request and nothing else: the cost for an unauthenticated route is a few
microseconds. A body that arrived with its headers (nearly every one) sets no timer at all.

A refused connection lingers (``_linger``): closed at once with the client still sending, the
kernel would answer its next bytes with a reset, and a client that has not yet read the 408
loses it. So after the answer the socket is half-closed and what still comes is read and
dropped until the client closes or ``LINGER_SECONDS`` pass.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

HEADERS_END = b"\r\n\r\n"
LINGER_SECONDS = 2.0  # for the client's bytes in flight; a refused client gets no longer
_TIMEOUT_MESSAGE = "The request's {part} took longer than {seconds:g} s to arrive ({setting})."
_guards: dict[int, HeaderDeadline] = {}  # id(aiohttp's protocol) -> its connection's guard


def _refusal(part: str, seconds: float, setting: str) -> str:
    return _TIMEOUT_MESSAGE.format(part=part, seconds=seconds, setting=setting)


def _raw_408(message: str) -> bytes:
    body = json.dumps({"error": {"code": "request_timeout", "message": message}}).encode()
    head = ("HTTP/1.1 408 Request Timeout\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n")
    return head.encode("ascii") + body


class BodyTimeout(web.HTTPRequestTimeout, TimeoutError):
    """The body did not arrive in time: a 408 where a handler reads it. A ``TimeoutError``
    too, so aiohttp's draining of an unread body after the answer ends quietly."""


class HeaderDeadline(asyncio.Protocol):
    """Between the socket and aiohttp's protocol for one connection: the headers of each
    request must be in within ``seconds`` of its first byte."""

    def __init__(self, inner: asyncio.Protocol, seconds: float) -> None:
        self._inner = inner
        self._seconds = seconds
        self._transport: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._waiting = True  # for the next request's headers
        self._started = False  # ... of which some bytes came
        self._tail = b""  # the last bytes seen, for a blank line split between reads
        self._in_request = False
        self._spare: socket.socket | None = None  # kept past the close, to linger on

    # -- asyncio's side ------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        _guards[id(self._inner)] = self
        self._inner.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_clock()
        _guards.pop(id(self._inner), None)
        self._inner.connection_lost(exc)
        if self._spare is not None:
            _linger(self._spare)
            self._spare = None

    def data_received(self, data: bytes) -> None:
        if self._waiting:
            self._watch(data)
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received()

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()

    # -- the app's side (body_deadline_middleware) ----------------------------------------------

    def request_started(self) -> None:
        self._in_request = True
        self._waiting = False
        self._stop_clock()

    def request_over(self, body_read: bool) -> None:
        """The answer is handed over: the next bytes are the next request's, unless the body
        was not all read (what aiohttp then drains of it is no request's headers)."""
        self._in_request = False
        self._waiting, self._started, self._tail = body_read, False, b""

    def linger_after_close(self) -> None:
        """A refusal is on its way: keep the socket open past the transport's close (a
        duplicate of it), to half-close and drain it then."""
        transport = self._transport
        if self._spare is None and transport is not None and not transport.is_closing():
            sock = transport.get_extra_info("socket")
            if sock is not None:
                self._spare = sock.dup()

    # -- the clock ------------------------------------------------------------------------------

    def _watch(self, data: bytes) -> None:
        if not self._started:
            data = data.lstrip(b"\r\n")  # blank lines before a request are not its end
            if not data:
                return
            self._started = True
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(self._seconds, self._expired)
        seen = self._tail + data
        if HEADERS_END in seen:
            self._waiting = False
            self._stop_clock()
        else:
            self._tail = seen[-(len(HEADERS_END) - 1):]

    def _stop_clock(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expired(self) -> None:
        self._timer = None
        transport = self._transport
        if not self._waiting or self._in_request or transport is None or transport.is_closing():
            return  # a request is being answered: its answer must not be cut into
        log.info("closed a connection whose request headers took over %g s", self._seconds)
        self.linger_after_close()
        transport.write(_raw_408(_refusal("headers", self._seconds, "REQUEST_HEADER_TIMEOUT")))
        transport.close()


class GuardedSite(web.BaseSite):
    """A TCP site whose connections have their headers' deadline (``HeaderDeadline``)."""

    def __init__(self, runner: web.BaseRunner, host: str, port: int, *,
                 header_seconds: float, backlog: int = 128) -> None:
        super().__init__(runner, backlog=backlog)
        self._host, self._port = host, port
        self._header_seconds = header_seconds
        self._bound: int | None = None

    @property
    def name(self) -> str:
        return f"http://{self._host}:{self.port}"

    @property
    def port(self) -> int:
        """The bound port (the one asked for before the site starts)."""
        return self._port if self._bound is None else self._bound

    async def start(self) -> None:
        await super().start()
        server = self._runner.server
        assert server is not None
        seconds = self._header_seconds

        def guarded() -> asyncio.Protocol:
            return HeaderDeadline(server(), seconds)

        listening = await asyncio.get_running_loop().create_server(
            guarded, self._host, self._port, backlog=self._backlog, reuse_address=True)
        self._server = listening
        if listening.sockets:
            self._bound = int(listening.sockets[0].getsockname()[1])


def body_deadline_middleware(seconds: float) -> Any:
    """The app's outermost middleware: the body's deadline, and the header clock told where a
    request begins and ends."""

    @web.middleware
    async def body_deadline(request: web.Request, handler: Handler) -> web.StreamResponse:
        guard = _guards.get(id(request.protocol))
        if guard is not None:
            guard.request_started()
        timer = None
        if request.body_exists and not request.content.is_eof():
            timer = asyncio.get_running_loop().call_later(seconds, _body_expired, request,
                                                          seconds)
        try:
            return await handler(request)
        finally:
            if timer is not None:
                timer.cancel()
            if guard is not None:
                guard.request_over(request.content.is_eof())

    return body_deadline


def _body_expired(request: web.Request, seconds: float) -> None:
    if request.content.is_eof():
        return
    log.info("a request body took over %g s to arrive: refused", seconds)
    guard = _guards.get(id(request.protocol))
    if guard is not None:
        guard.linger_after_close()
    request.content.set_exception(BodyTimeout(
        text=_refusal("body", seconds, "REQUEST_BODY_TIMEOUT"), headers={"Connection": "close"}))


def _linger(sock: socket.socket) -> None:
    """Half-close ``sock`` (the answer is out: the client sees its end) and read and drop what
    still comes, until the client closes or ``LINGER_SECONDS`` pass; then close it."""
    loop = asyncio.get_running_loop()
    try:
        sock.setblocking(False)
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        sock.close()
        return
    fd = sock.fileno()

    def finish() -> None:
        loop.remove_reader(fd)
        timer.cancel()
        sock.close()

    def drain() -> None:
        try:
            data = sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            finish()

    timer = loop.call_later(LINGER_SECONDS, finish)
    loop.add_reader(fd, drain)
