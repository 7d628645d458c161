"""The turn spool: finished turns that could not reach the database wait here, on disk.

One JSON file per turn in ``<PAWWAKE_DATA_DIR>/turn-spool`` (each process its own folder, see
``spool_folder``), written atomically (temporary file, fsync, rename, fsync of the folder),
named so that the name order is the order the turns finished. A background loop writes them to
the database in that order once it answers again (at start-up, then every few seconds while any
wait); each turn carries its idempotency key, so a file written twice (a crash between the
commit and the delete) adds nothing. The folder has a size cap: when full, the oldest turns are
kept and new ones are dropped and counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pawwake.conversations.spool_folder import SpoolFolders, sync_folder
from pawwake.db.pool import UNAVAILABLE_ERRORS
from pawwake.db.turn_injections import InjectedEntry, without_text
from pawwake.llm.sse import CapturedReply, TokenUsage
from pawwake.tasks import running_beside
from pawwake.text.messages import ChatMessage

if TYPE_CHECKING:
    from pawwake.database import Database

log = logging.getLogger(__name__)

FOLDER = "turn-spool"
REPLAY_EVERY_SECONDS = 5.0
_FORMAT = 1
_counter = itertools.count()

# Writes one turn read back from the spool: (turn, reply, incomplete).
StoreTurn = Callable[[Any, CapturedReply, bool], Awaitable[Any]]


@dataclass
class SpooledTurn:
    """A turn read back from the spool: what the turn writer needs of a request."""

    session_id: str
    model: str
    turn_messages: list[ChatMessage]
    turn_key: str
    protocol: str | None = None  # None: chat completions
    received_at: datetime | None = None  # when the request came (a rename since is followed)
    injected: list[InjectedEntry] = field(default_factory=list)  # the injected record


def encode(turn: Any, reply: CapturedReply, *, incomplete: bool) -> bytes:
    """A turn as durable JSON. Only the client messages the turn planner reads are kept:
    the message before the last user message, and everything from it on."""
    messages = list(turn.turn_messages)
    received = getattr(turn, "received_at", None)
    last_user = max((i for i, m in enumerate(messages)
                     if isinstance(m, dict) and m.get("role") == "user"), default=-1)
    record = {
        "format": _FORMAT,
        "session_id": turn.session_id,
        "model": turn.model,
        "turn_key": turn.turn_key,
        "protocol": getattr(turn, "protocol", None),
        "received_at": received.isoformat() if received is not None else None,
        "incomplete": incomplete,
        "client_messages": messages[max(0, last_user - 1):],
        # What was injected, without its texts (the record the turn's reply keeps).
        "injected": [without_text(entry) for entry in getattr(turn, "injected", ())],
        "reply": {
            "content": reply.content, "reasoning_content": reply.reasoning_content,
            "tool_calls": reply.tool_calls, "extras": reply.extras,
            "raw_usage": reply.raw_usage, "finish_reason": reply.finish_reason,
            "model": reply.model, "done": reply.done, "metadata": reply.metadata,
        },
    }
    return json.dumps(record, ensure_ascii=False).encode("utf-8", "surrogatepass")


def decode(data: bytes) -> tuple[SpooledTurn, CapturedReply, bool]:
    record = json.loads(data.decode("utf-8", "surrogatepass"))
    turn = SpooledTurn(session_id=record["session_id"], model=record["model"],
                       turn_messages=record["client_messages"], turn_key=record["turn_key"],
                       protocol=record.get("protocol"), injected=record.get("injected") or [],
                       received_at=datetime.fromisoformat(record["received_at"])
                       if record.get("received_at") else None)
    saved = record["reply"]
    reply = CapturedReply(
        content=saved["content"], reasoning_content=saved["reasoning_content"],
        tool_calls=saved["tool_calls"], extras=saved["extras"], raw_usage=saved["raw_usage"],
        usage=TokenUsage.from_openai(saved["raw_usage"]), finish_reason=saved["finish_reason"],
        model=saved["model"], done=saved["done"], metadata=saved.get("metadata") or {})
    return turn, reply, bool(record["incomplete"])


def _write_atomic(folder: Path, name: str, data: bytes) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    temporary = folder / (name + ".tmp")
    with open(temporary, "wb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, folder / name)
    sync_folder(folder)


def _remove(folder: Path, name: str, *, keep_as: str | None = None) -> None:
    if keep_as is None:
        (folder / name).unlink(missing_ok=True)
    else:
        os.replace(folder / name, folder / keep_as)
    sync_folder(folder)


class TurnSpool:
    """The spool folder and its counters (``pending``, ``dropped``, ``failed``)."""

    def __init__(self, folder: Path, max_bytes: int) -> None:
        self._folders = SpoolFolders(folder)
        self.max_bytes = max_bytes
        self.dropped = 0  # turns refused because the spool was full (since start)
        self.failed = 0  # spooled turns the database refused for good (kept as *.failed)
        self._files: list[str] = []
        self._bytes = 0
        self._lock = asyncio.Lock()
        self._wake = asyncio.Event()

    @property
    def folder(self) -> Path:
        """The folder this process writes to (claimed on first use)."""
        return self._folders.owned or self._folders.primary

    def open(self) -> None:
        """Pick up what an earlier run left, and what processes gone from a shared data
        folder left (a folder is made on first use, so a gateway without a database never
        creates its data folder)."""
        if not self._folders.existing():
            return
        folder = self._folders.claim()
        for stale in folder.glob("*.tmp"):
            stale.unlink(missing_ok=True)  # never renamed: its turn was not spooled
        self._folders.adopt_orphans()
        self._files = sorted(path.name for path in folder.glob("*.json"))
        self._bytes = sum((folder / name).stat().st_size for name in self._files)
        self.failed = len(list(folder.glob("*.failed")))

    def close(self) -> None:
        """Give the folder up (at shutdown): another process may adopt what is left."""
        self._folders.release()

    async def adopt_orphans(self) -> int:
        """Take over the turns of processes that left a shared data folder; how many."""
        if len(self._folders.existing()) < 2:
            return 0
        async with self._lock:
            moved = await asyncio.to_thread(self._folders.adopt_orphans)
            for name in moved:
                if name.endswith(".json"):
                    self._files.append(name)
                    self._bytes += (self.folder / name).stat().st_size
                else:
                    self.failed += 1
            self._files.sort()
        if moved:
            self._wake.set()
        return len(moved)

    @property
    def pending(self) -> int:
        return len(self._files)

    def status(self) -> dict[str, int]:
        return {"pending": self.pending, "dropped": self.dropped, "failed": self.failed}

    async def add(self, turn: Any, reply: CapturedReply, *, incomplete: bool) -> bool:
        """Keep a turn on disk; False (and counted) when the spool is full."""
        data = encode(turn, reply, incomplete=incomplete)
        if self._bytes + len(data) > self.max_bytes:
            self.dropped += 1
            log.error("turn spool full (%d turns, %d bytes): a turn was dropped (%d so far)",
                      self.pending, self._bytes, self.dropped)
            return False
        name = f"{time.time_ns():020d}-{next(_counter):06d}-{turn.turn_key}.json"
        self._bytes += len(data)
        try:
            folder = await asyncio.to_thread(self._folders.claim)
            await asyncio.to_thread(_write_atomic, folder, name, data)
        except OSError:
            self._bytes -= len(data)
            self.dropped += 1
            log.exception("could not write a turn to the spool; dropped")
            return False
        self._files.append(name)
        self._files.sort()
        self._wake.set()
        return True

    async def replay(self, store: StoreTurn) -> int:
        """Write spooled turns in order with ``store``; a connection error stops (and
        propagates), the rest stays for the next try. Returns how many were written or found
        written."""
        written = 0
        async with self._lock:
            for name in list(self._files):
                path = self.folder / name
                data = b""
                try:
                    data = await asyncio.to_thread(path.read_bytes)
                    turn, reply, incomplete = decode(data)
                except (OSError, ValueError, KeyError, TypeError):
                    log.exception("unreadable spooled turn %s kept as .failed", name)
                    await self._drop(name, len(data), failed=True)
                    continue
                try:
                    await store(turn, reply, incomplete)
                except UNAVAILABLE_ERRORS:
                    raise
                except Exception:
                    log.exception("a spooled turn could not be written; kept as .failed")
                    await self._drop(name, len(data), failed=True)
                    continue
                await self._drop(name, len(data), failed=False)
                written += 1
        if written:
            log.info("wrote %d spooled turns to the database (%d still waiting)", written,
                     self.pending)
        return written

    async def _drop(self, name: str, size: int, *, failed: bool) -> None:
        await asyncio.to_thread(_remove, self.folder, name,
                                keep_as=name + ".failed" if failed else None)
        self._files.remove(name)
        self._bytes = max(0, self._bytes - size)
        if failed:
            self.failed += 1

    async def run(self, database: Database | None, store: StoreTurn) -> None:
        """Try the spool at start-up, then every few seconds while anything waits."""
        while True:
            try:
                await self.adopt_orphans()
            except OSError:
                log.exception("could not adopt the spool of a gateway process that stopped")
            if self.pending and database is not None:
                try:
                    await self.replay(store)
                except UNAVAILABLE_ERRORS as exc:
                    with contextlib.suppress(Exception):
                        await database.pool.clear()  # stale after a restart
                    log.info("database still unreachable (%s); %d turns wait in the spool",
                             type(exc).__name__, self.pending)
                except Exception:
                    log.exception("turn spool replay failed")
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), REPLAY_EVERY_SECONDS)


@asynccontextmanager
async def open_turn_spool(spool: TurnSpool, database: Database | None,
                          store: StoreTurn) -> AsyncIterator[None]:
    """Read the spool's folder and run its replay loop (writing with ``store``) while the app
    runs."""
    await asyncio.to_thread(spool.open)
    if spool.pending:
        log.info("%d turns wait in the spool from an earlier run", spool.pending)
    async with running_beside(spool.run(database, store), name="turn-spool"):
        yield
    spool.close()
