"""A chat request's life, the same for every protocol: read and check it, serve its turn in a
task of its own (prepare, relay, end), answer, and log one line.

The request's settings are one snapshot (``settings_of``, often taken already by the CORS
middleware), read once and handed to everything the turn does.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from pawwake.app_faces import settings_of
from pawwake.chat.prepared import ChatRejected
from pawwake.conversations.pending import release_pending, wait_stored
from pawwake.llm.upstream import UpstreamFailure
from pawwake.relay.ending import CLIENT_GONE, failed
from pawwake.relay.stream import relay
from pawwake.relay.turn import ChatTurn, ShutdownRefusal
from pawwake.replies_in_flight import SHUTDOWN_MESSAGE
from pawwake.settings import Settings

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def serve(turn: ChatTurn, settings: Settings, body: dict[str, Any], raw: bytes
                ) -> web.StreamResponse:
    """Prepare, relay and end one turn; once it is stored, release the held end of the
    stream. A cancelled task (the client left, the drain bound, shutdown) ends the turn
    with what it had (``ChatTurn.cut_short``)."""
    try:
        prepared = turn.prepared = await turn.prepare(settings, body, raw)
        relayed = await relay(turn, settings, prepared)
        turn.status = relayed.end.status
        turn.end(relayed.end)
        if relayed.end.failure is None:
            await wait_stored(prepared)
        if relayed.open:
            try:
                if relayed.held:
                    await relayed.response.write(relayed.held)
                await relayed.response.write_eof()
            except ConnectionResetError:
                log.debug("client went away before the end of a stored stream")
        return relayed.response
    except ChatRejected as exc:
        turn.status = exc.status
        return turn.rejected(exc, "invalid_request_error" if exc.status < 500 else "api_error")
    except UpstreamFailure as exc:
        turn.status = exc.status
        turn.end(failed(exc.code, status=exc.status))
        return turn.upstream_failed(exc)
    except asyncio.CancelledError:
        turn.status = CLIENT_GONE
        if turn.prepared is not None and turn.ended is None:
            end = turn.cut_short()
            turn.end(end)
            if end.failure is None and turn.drain_expired:
                return web.Response(status=CLIENT_GONE)
        raise
    finally:
        if turn.prepared is not None:
            release_pending(turn.parts.flow.chat.pending, turn.prepared)


def turn_handler(turn_class: type[ChatTurn], request_log: logging.Logger) -> Handler:
    """The request handler of a protocol, which differs from chat's only in its turn's hooks:
    read and check the request, then serve it in the turn's own task (see ChatTurn). Its one
    INFO line per request goes to ``request_log``, the route's."""

    async def handler(request: web.Request) -> web.StreamResponse:
        started = time.perf_counter()
        turn = turn_class(request)
        try:
            settings = await settings_of(request)
            raw = await request.read()
            body = turn.parse_body(raw)
            turn.task = turn.parts.flow.tasks.spawn(serve(turn, settings, body, raw),
                                                  name=f"{turn.kind}-turn")
            in_flight = turn.parts.in_flight
            in_flight.add(turn)
            turn.task.add_done_callback(lambda _task: in_flight.discard(turn))
            return await asyncio.shield(turn.task)
        except ChatRejected as exc:
            turn.status = exc.status
            return turn.rejected(exc, "invalid_request_error")
        except asyncio.CancelledError:
            if _ended_for_shutdown(turn):
                turn.status = ShutdownRefusal.status
                return turn.upstream_failed(ShutdownRefusal(SHUTDOWN_MESSAGE))
            turn.status = CLIENT_GONE
            turn.client_left()
            raise
        except web.HTTPException as exc:
            turn.status = exc.status
            raise
        finally:
            prepared = turn.prepared
            request_log.info("%s model=%s stream=%s memories=%d status=%d latency_ms=%.0f",
                             turn.kind, prepared.model if prepared else "-",
                             prepared.stream if prepared else "-",
                             prepared.memory_count if prepared else 0, turn.status,
                             (time.perf_counter() - started) * 1000)

    return handler


def _ended_for_shutdown(turn: ChatTurn) -> bool:
    """The turn's task was cancelled by the shutdown, not this handler by its client."""
    current = asyncio.current_task()
    return turn.ended_by_shutdown and turn.task is not None and turn.task.cancelled() \
        and current is not None and not current.cancelling()
