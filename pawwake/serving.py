"""Serving the app on a TCP port: what ``web.run_app`` does, with the guarded site.

``web.run_app`` builds its own ``TCPSite``, whose connections go straight to aiohttp's
protocol; the gateway's go through ``slow_clients.HeaderDeadline`` first. The rest is as in
``run_app``: the runner handles SIGINT and SIGTERM (a graceful exit: the site stops taking
connections, ``on_shutdown`` runs, requests get ``shutdown_timeout``), then the tasks left
are cancelled and the loop closed.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from aiohttp import web

from pawwake.slow_clients import GuardedSite


def serve(app: web.Application, *, host: str, port: int, header_seconds: float,
          listening: Callable[[], None], **runner_options: Any) -> None:
    """Serve ``app`` until SIGINT or SIGTERM; ``listening()`` once the socket is bound;
    ``runner_options`` go to ``web.AppRunner`` (and on to aiohttp's protocol)."""
    loop = asyncio.new_event_loop()
    main = loop.create_task(_serve(app, host, port, header_seconds, listening, runner_options))
    try:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(main)
    except (web.GracefulExit, KeyboardInterrupt):
        pass
    finally:
        try:
            if not main.done():  # a finished task would re-raise its error, losing its trace
                main.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    loop.run_until_complete(main)
        finally:
            _cancel_all(loop)
            loop.run_until_complete(loop.shutdown_asyncgens())
            asyncio.set_event_loop(None)
            loop.close()


async def _serve(app: web.Application, host: str, port: int, header_seconds: float,
                 listening: Callable[[], None], runner_options: dict[str, Any]) -> None:
    runner = web.AppRunner(app, handle_signals=True, **runner_options)
    await runner.setup()
    try:
        await GuardedSite(runner, host, port, header_seconds=header_seconds).start()
        listening()
        await asyncio.Event().wait()  # until the signal's GracefulExit
    finally:
        await runner.cleanup()


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    left = asyncio.all_tasks(loop)
    if not left:
        return
    for task in left:
        task.cancel()
    loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
