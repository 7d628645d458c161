"""Start the Pawwake gateway: ``python pawwake.py [--host H] [--port P]``."""

from __future__ import annotations

import argparse
import os

from aiohttp import web

from pawwake.app import create_app
from pawwake.logs import configure_logging
from pawwake.removed_settings import warn_removed
from pawwake.settings import Settings


def main() -> None:
    parser = argparse.ArgumentParser(description="Pawwake memory gateway")
    parser.add_argument("--host", default=os.environ.get("HOST", "0.0.0.0"))
    parser.add_argument("--port", type=int, default=None, help="default: $PORT or 8000")
    args = parser.parse_args()
    settings = Settings.from_env()
    if args.port is not None:
        settings = settings.with_values({"PORT": args.port})
    configure_logging(settings["LOG_LEVEL"])
    warn_removed(os.environ)
    web.run_app(create_app(settings), host=args.host, port=settings["PORT"],
                access_log=None, print=None)


if __name__ == "__main__":
    main()
