"""Where the data lives, said at start: the data folder's absolute path, and a loud warning
when a database from an earlier start sits in the folder the program was started from (where
a relative data folder used to point) while the data folder, next to the program, has none."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from pawwake.settings import Settings

log = logging.getLogger(__name__)

EMBEDDED_FOLDER = "postgres"  # db/embedded.py keeps the embedded server's files here


def earlier_database(settings: Settings, environ: Mapping[str, str], cwd: Path) -> Path | None:
    """A ``./data`` of the starting folder holding an embedded database, when the data folder
    was left to its default and has none of its own."""
    if "PAWWAKE_DATA_DIR" in environ or settings.DATABASE_URL or not settings.DATABASE_ENABLED:
        return None
    chosen, earlier = Path(settings.PAWWAKE_DATA_DIR), cwd / "data"
    if earlier.resolve() == chosen.resolve() or (chosen / EMBEDDED_FOLDER).is_dir():
        return None
    return earlier if (earlier / EMBEDDED_FOLDER).is_dir() else None


def announce_data_folder(settings: Settings, environ: Mapping[str, str], cwd: Path) -> None:
    embedded = settings.DATABASE_ENABLED and not settings.DATABASE_URL
    log.info("data folder: %s (%s)", settings.PAWWAKE_DATA_DIR,
             "embedded PostgreSQL, turn spool, tokenizer cache" if embedded
             else "turn spool, tokenizer cache")
    earlier = earlier_database(settings, environ, cwd)
    if earlier is not None:
        log.warning("a database from an earlier start is in %s (the folder this was started "
                    "from); the data folder is now %s, next to the program, and starts empty. "
                    "To keep the earlier data, stop and start again with PAWWAKE_DATA_DIR=%s "
                    "(or move that folder's contents here)", earlier,
                    settings.PAWWAKE_DATA_DIR, earlier.resolve())
