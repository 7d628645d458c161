"""The tokenizer is loaded at start (off the request path) only when memory or recall is on.

jieba is process-wide, so each case starts the real app in a fresh interpreter.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = """
import asyncio, json, sys
from aiohttp import web
from pawwake import keys
from pawwake.app import create_app
from pawwake.settings import Settings
from pawwake.text import tokens
from pawwake.services import services_of

async def main():
    settings = Settings.from_env({}, **json.loads(sys.argv[1]))
    app = create_app(settings)
    runner = web.AppRunner(app)
    await runner.setup()
    try:
        print(json.dumps({"loaded": tokens.is_loaded(),
                          "embed_handler": "memory_embed" in services_of(app).jobs.handlers}))
    finally:
        await runner.cleanup()

asyncio.run(main())
"""


def start_app(database_url: str, data_dir: Path, **settings: object) -> dict[str, bool]:
    values = {"DATABASE_URL": database_url, "PAWWAKE_DATA_DIR": str(data_dir),
              "JOB_WORKERS": 0, **settings}
    done = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(values)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(("memory", "recall", "loaded"), [
    (True, False, True),
    (False, True, True),
    (False, False, False),
])
def test_tokenizer_loads_at_start_when_needed(database_url: str, tmp_path: Path, memory: bool,
                                              recall: bool, loaded: bool) -> None:
    state = start_app(database_url, tmp_path, MEMORY_ENABLED=memory,
                      CONVERSATION_RECALL_ENABLED=recall)
    assert state == {"loaded": loaded, "embed_handler": True}
    assert (tmp_path / "jieba.cache").exists() == loaded  # the cache lives in the data folder
