"""Logging set-up: one format, secrets never formatted into lines."""

from __future__ import annotations

import logging


def configure_logging(level: str = "INFO") -> None:
    logging.basicConfig(level=getattr(logging, level, logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("aiohttp.access", "jieba"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
