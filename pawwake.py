"""Start the Pawwake gateway: ``python pawwake.py [--host H] [--port P]``.

``--check-upgrade`` prints what starting on a Pawwake 4.x database (DATABASE_URL) would adopt,
changing nothing; ``--rollback-upgrade`` puts an adopted database back as 4.x had it.

SIGTERM and SIGINT shut down within SHUTDOWN_GRACE_SECONDS + ``SHUTDOWN_SECONDS`` (see
``pawwake.tasks``): no new connection is taken, replies in flight get the grace to finish (the
rest end with their protocol's error event), other requests a short grace, then background
work, then resources close. Should anything still hang, a watchdog ends the process (exit code
1) rather than leave it to a host's SIGKILL.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from aiohttp import web

from pawwake.c_heap import map_large_blocks
from pawwake.data_folder import announce_data_folder
from pawwake.logs import configure_logging, listening_line
from pawwake.removed_settings import warn_removed
from pawwake.serving import serve
from pawwake.settings import Settings, environment_errors
from pawwake.tasks import REQUEST_GRACE_SECONDS, SHUTDOWN_SECONDS

log = logging.getLogger("pawwake")

# Tokenising runs on a worker thread and holds the interpreter lock while it cuts. Each time
# the event loop releases the lock (every socket send, every query sent to PostgreSQL) it then
# waits for the worker to hand it back, up to the switch interval: 5 ms by default, which made
# every database call of every chat slower while a large input was being indexed. A shorter
# interval makes that hand-back 10x faster (bench/stall.py: GET / p99 and chat TTFT p99 lower).
SWITCH_INTERVAL_SECONDS = 0.0005


def watchdog(grace_seconds: float) -> Callable[[web.Application], Awaitable[None]]:
    """on_shutdown, first of all: end the process if shutdown is not over in the streams'
    grace plus SHUTDOWN_SECONDS."""
    bound = grace_seconds + SHUTDOWN_SECONDS

    async def start_watchdog(_app: web.Application) -> None:
        def overdue() -> None:
            log.error("shutdown did not finish in %g s; exiting now", bound)
            logging.shutdown()
            os._exit(1)

        log.info("shutting down (at most %g s)", bound)
        _shutdown_started.append(time.monotonic())
        timer = threading.Timer(bound, overdue)
        timer.daemon = True
        timer.start()

    return start_watchdog


_shutdown_started: list[float] = []


def refuse_bad_environment() -> None:
    """A value the gateway cannot use stops the start, each named in one line: serving on it
    would fail every chat later, far from the cause; a failed start shows in the deploy log,
    and a host such as Render keeps the previous deploy running meanwhile."""
    problems = environment_errors(os.environ)
    if not problems:
        return
    configure_logging("INFO")
    for problem in problems:
        log.error("%s %s (set in the environment)", problem.name, problem.message)
    log.error("not starting: fix the value(s) above")
    sys.exit(2)


def main() -> None:
    parser = argparse.ArgumentParser(description="Pawwake memory gateway")
    parser.add_argument("--host", default=os.environ.get("HOST", "0.0.0.0"))
    parser.add_argument("--port", type=int, default=None, help="default: $PORT or 8000")
    parser.add_argument("--check-upgrade", action="store_true",
                        help="print what would be adopted from a Pawwake 4.x database at "
                             "DATABASE_URL (and any row it cannot take); changes nothing")
    parser.add_argument("--rollback-upgrade", action="store_true",
                        help="move the adopted 4.x tables back so Pawwake 4.x runs on them "
                             "again (the newer tables are kept aside)")
    args = parser.parse_args()
    refuse_bad_environment()
    settings = Settings.from_env()
    if args.check_upgrade or args.rollback_upgrade:
        from pawwake.upgrade import cli

        configure_logging("WARNING")
        command = cli.check_upgrade if args.check_upgrade else cli.roll_back_upgrade
        sys.exit(command(settings, sys.stdout))
    if args.port is not None:
        settings = settings.with_values({"PORT": args.port})
    from pawwake.app import create_app  # after the upgrade commands, which need none of it

    configure_logging(settings.LOG_LEVEL)
    warn_removed(os.environ)
    announce_data_folder(settings, os.environ, Path.cwd())
    sys.setswitchinterval(SWITCH_INTERVAL_SECONDS)
    map_large_blocks()  # memory of a large request goes back to the system afterwards
    app = create_app(settings)
    app.on_shutdown.insert(0, watchdog(settings.SHUTDOWN_GRACE_SECONDS))
    line = listening_line(args.host, settings.PORT)
    # Once the socket is bound: our one line (aiohttp's banner is not printed).
    # Request bodies are never inflated (pawwake/request_body.py refuses compressed ones). A
    # client that hangs up cancels its request's handler, and so the database statement it
    # waits for (as in aiohttp's test server: the tests run the path production runs); work
    # that must outlive its client (a chat's relay, the turn stored after it) runs as tasks.
    # A request's headers must arrive within REQUEST_HEADER_TIMEOUT (pawwake/slow_clients.py).
    serve(app, host=args.host, port=settings.PORT,
          header_seconds=settings.REQUEST_HEADER_TIMEOUT,
          listening=lambda: log.info("%s", line), access_log=None,
          shutdown_timeout=REQUEST_GRACE_SECONDS, auto_decompress=False,
          handler_cancellation=True)
    if _shutdown_started:
        log.info("stopped in %.1f s", time.monotonic() - _shutdown_started[0])


if __name__ == "__main__":
    main()
