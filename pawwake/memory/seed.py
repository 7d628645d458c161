"""Seed memories: an operator file (``seed_memories.json`` or ``.txt``) imported on request.

Each item gets the external id ``seed:<sha256 of its normalised content>`` unless it names its
own, so running the import again adds only what is new in the file. A reminder whose time has
passed by the import is not set (the memory is kept), so it never fires in the first chat.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pawwake.database import require_database
from pawwake.db import memories as db
from pawwake.db.memory_rows import NewMemory
from pawwake.db.pool import transaction
from pawwake.memory.describe import enqueue_describing
from pawwake.memory.embedding_jobs import enqueue_embedding
from pawwake.memory.fields import FieldError, parse_create
from pawwake.memory.text_import import split_lines
from pawwake.search.terms import terms_for
from pawwake.settings import PROGRAM_DIR

if TYPE_CHECKING:
    from pawwake.memory.faces import MemoryWrites

log = logging.getLogger(__name__)

SEED_FILES = ("seed_memories.json", "seed_memories.txt")


class NoSeedFile(LookupError):
    """Neither seed file exists in the data folder or the project folder."""


def seed_folders(data_dir: str) -> list[Path]:
    return [Path(data_dir).expanduser(), PROGRAM_DIR]


def find_seed_file(data_dir: str) -> Path | None:
    for folder in seed_folders(data_dir):
        for name in SEED_FILES:
            path = folder / name
            if path.is_file():
                return path
    return None


def seed_external_id(content: str) -> str:
    normalised = "".join(content.split()).lower()
    return "seed:" + hashlib.sha256(normalised.encode("utf-8")).hexdigest()[:32]


def parse_seed_file(path: Path) -> list[NewMemory]:
    """Validated create fields for every item of the file (raises FieldError)."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise FieldError(None, f"{path.name} is not UTF-8 text.", "invalid_seed_file") from None
    if path.suffix == ".txt":
        items: list[Any] = [{"content": line} for line in split_lines(text)]
    else:
        try:
            items = json.loads(text)
        except json.JSONDecodeError as exc:
            raise FieldError(None, f"{path.name} is not valid JSON ({exc.msg}, line "
                             f"{exc.lineno}).", "invalid_seed_file") from None
        if not isinstance(items, list):
            raise FieldError(None, f"{path.name} must hold a JSON list of memories.",
                             "invalid_seed_file")
    parsed = []
    for number, item in enumerate(items):
        try:
            fields = parse_create(item)
        except FieldError as exc:
            raise FieldError(exc.field, f"{path.name} item {number}: {exc.message}",
                             "invalid_seed_file") from None
        fields["external_id"] = fields["external_id"] or seed_external_id(fields["content"])
        parsed.append(fields)
    return parsed


async def import_seed(writes: MemoryWrites) -> dict[str, Any]:
    """Import the operator's seed file; items already imported are skipped."""
    data_dir = writes.data_dir
    loop = asyncio.get_running_loop()
    path = await loop.run_in_executor(None, find_seed_file, data_dir)
    if path is None:
        raise NoSeedFile("No seed file found: put seed_memories.json (a list of memories) or "
                         "seed_memories.txt (one memory per line) in the data folder "
                         "(PAWWAKE_DATA_DIR) or the project folder.")
    items = await loop.run_in_executor(None, parse_seed_file, path)
    by_external_id: dict[str | None, NewMemory] = {}
    for item in items:  # the first of two items with one id wins
        by_external_id.setdefault(item["external_id"], item)
    unique = list(by_external_id.values())
    # A seed file is written once and imported later, maybe much later: a reminder whose time
    # has already passed would fire in the very first chat. Keep the memory, not the alarm.
    now = datetime.now(UTC)
    past = [item for item in unique if (due := item.get("remind_at")) and due <= now]
    for item in past:
        item["remind_at"] = None
    terms = await terms_for(writes.data_dir,
                            [item["content"] for item in unique])
    rows: list[NewMemory] = [{**item, "search_terms": t}
                             for item, t in zip(unique, terms, strict=True)]
    async with transaction(require_database(writes.database).pool) as cur:
        await db.lock_memory_imports(cur)
        inserted = await db.insert_memories(cur, rows)
        if inserted:
            await enqueue_embedding(cur)
            await enqueue_describing(cur, writes.config.current())
    if inserted:
        writes.jobs.wake()
    log.info("seed import from %s: %s imported, %s skipped, %s past reminder(s) not set",
             path.name, len(inserted), len(items) - len(inserted), len(past))
    return {"status": "done", "file": path.name, "imported": len(inserted),
            "skipped": len(items) - len(inserted), "past_reminders": len(past)}
