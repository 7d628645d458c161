"""A throwaway embedded PostgreSQL for a benchmark: a new temporary folder (with the runtime
folder its socket needs), the server stopped and the folder removed when the run ends."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pawwake.db.embedded import start_embedded, stop_embedded


@contextmanager
def throwaway_postgres(prefix: str, data: str = "") -> Iterator[tuple[Any, Path]]:
    """``(server, folder)``: the server keeps its data in ``folder / data`` (the folder itself
    by default), so a benchmark may put its own files beside it."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    (folder / "run").mkdir(mode=0o700, parents=True, exist_ok=True)
    os.environ.setdefault("XDG_RUNTIME_DIR", str(folder / "run"))
    server = start_embedded(folder / data if data else folder)
    try:
        yield server, folder
    finally:
        stop_embedded(server)
        shutil.rmtree(folder, ignore_errors=True)
