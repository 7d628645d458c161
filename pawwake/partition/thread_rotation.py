"""Reading the active thread and rotating it, with no connection or lock held while the
summary model runs.

A short read (state row and live messages) decides whether a rotation is due. A rotation that
needs CACHE_SUMMARY_MODEL first takes the row's lease (kept alive while the model works), so a
concurrent request (in any process) waits for its result instead of summarising the same
rounds; the new state is saved with a compare-and-set on the row's version. A request that
loses the race reads again and finds the thread already rotated: two concurrent requests never
rotate twice. A lease whose holder died ends after LEASE_SECONDS. Waiters in the holder's
process are woken the moment it saves; others notice on their next poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime

import aiopg

from pawwake.cancelling import cancel_and_wait
from pawwake.chat.prepared import ChatRejected
from pawwake.db.partition_state import (
    PartitionState,
    claim_rotation,
    load_state,
    recent_thread_messages,
    release_rotation,
    renew_rotation,
    save_state_if,
)
from pawwake.db.pool import DATABASE_ERRORS, cursor
from pawwake.partition.rotation import (
    Folder,
    Summariser,
    catch_up,
    live_round_limit,
    rotate,
    rotation_due,
    rotations_allowed,
)
from pawwake.settings import Settings
from pawwake.text.messages import ChatMessage
from pawwake.text.rounds import StoredRound, group_rounds

log = logging.getLogger(__name__)

LEASE_SECONDS = 30.0  # renewed every third of it while the summary model works
_SAVE_ATTEMPTS = 4  # compare-and-set races lost in a row before answering unrotated
_POLL_FIRST, _POLL_MAX = 0.05, 1.0  # waiting for another request's rotation

# Waiters for a rotation of a thread in this process (with their event loop), woken when it
# ends; one entry per thread at most.
_ROTATED: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Event]] = {}

# The client's turn against the rounds read: (history rounds, current turn, compared).
Split = Callable[[list[StoredRound]],
                 tuple[list[StoredRound], list[ChatMessage], list[ChatMessage]]]


def unavailable() -> ChatRejected:
    """The 503 of partition mode when the conversation database cannot be read or written."""
    return ChatRejected(503, "partition_database_unavailable",
                        "The conversation database is unavailable; partition mode cannot "
                        "build the context. Try again shortly.")


@dataclass
class ThreadRead:
    """The active thread as one request sees it, after any rotation it made or found."""

    state: PartitionState
    rounds: list[StoredRound]  # as read: settled rounds and the current tool round
    history: list[StoredRound]  # the live history behind the current turn
    current: list[ChatMessage]
    compared: list[ChatMessage]
    over: bool = False  # older live rounds were left out of the read (catch-up due)
    # the history as split, unrotated
    settled: list[StoredRound] = field(default_factory=list)

    @property
    def consumed(self) -> bool:
        """The split took the last stored round into the current turn (tool results)."""
        return len(self.settled) < len(self.rounds)


def _live(history: list[StoredRound], start_id: int | None) -> list[StoredRound]:
    if start_id is None:
        return history
    for index, round_ in enumerate(history):
        if round_.messages[0]["id"] == start_id:
            return history[index:]
    return history


async def rotations(state: PartitionState, history: list[StoredRound], settings: Settings,
                    summarise: Summariser, fold: Folder, now: datetime
                    ) -> tuple[PartitionState, list[StoredRound]]:
    """Rotate as often as allowed and due; the final state and the live history."""
    for _ in range(rotations_allowed(settings)):
        rotated = await rotate(state, history, settings, summarise, now, fold)
        if rotated is None:
            break
        moved = rotated.zone_start_message_id != state.zone_start_message_id
        state = rotated
        history = _live(history, state.zone_start_message_id)
        if not moved:
            break
    return state, history


async def _read(pool: aiopg.Pool, thread: str, x: int, split: Split) -> ThreadRead:
    async with cursor(pool) as cur:
        state = await load_state(cur, thread)
        rows, over = await recent_thread_messages(cur, thread, state.zone_start_message_id,
                                                  live_round_limit(x))
    rounds = group_rounds(rows)
    history, current, compared = split(rounds)
    return ThreadRead(state, rounds, history, current, compared, over, history)


def _due(read: ThreadRead, settings: Settings, x: int, now: datetime) -> bool:
    """A catch-up or rotation would change the state (see ``rotation.catch_up``/``rotate``)."""
    return (read.over and len(read.history) > x) or rotation_due(read.history, x, settings, now)



async def _rotate(read: ThreadRead, settings: Settings, summarise: Summariser, fold: Folder,
                  now: datetime) -> tuple[PartitionState, list[StoredRound]]:
    state, history = read.state, read.history
    if read.over:
        state, history = await catch_up(state, history, settings, summarise, fold)
    return await rotations(state, history, settings, summarise, fold, now)


async def _wait_for_rotation(thread: str, seconds: float) -> None:
    """Until a rotation of ``thread`` ends in this process, or ``seconds`` pass."""
    loop = asyncio.get_running_loop()
    held = _ROTATED.get(thread)
    if held is None or held[0] is not loop:
        held = _ROTATED[thread] = (loop, asyncio.Event())
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(held[1].wait(), seconds)


def _rotation_ended(thread: str) -> None:
    held = _ROTATED.pop(thread, None)
    if held is not None and held[0] is asyncio.get_running_loop():
        held[1].set()


async def _keep_lease(pool: aiopg.Pool, thread: str, version: int) -> None:
    while True:
        await asyncio.sleep(LEASE_SECONDS / 3)
        try:
            async with cursor(pool) as cur:
                await renew_rotation(cur, thread, version, LEASE_SECONDS)
        except DATABASE_ERRORS as exc:  # the save will tell whether the lease still held
            log.warning("could not renew the rotation lease: %s", type(exc).__name__)


async def _release(pool: aiopg.Pool, thread: str, version: int) -> None:
    with contextlib.suppress(*DATABASE_ERRORS):
        async with cursor(pool) as cur:
            await release_rotation(cur, thread, version)


async def _rotate_leased(pool: aiopg.Pool, read: ThreadRead, version: int, settings: Settings,
                         summarise: Summariser, fold: Folder, now: datetime
                         ) -> tuple[PartitionState, list[StoredRound]]:
    """The rotation under a lease held at ``version``: renewed meanwhile, given back when
    the rotation ends in anything but a save."""
    thread = read.state.thread_id
    keeper = asyncio.create_task(_keep_lease(pool, thread, version))
    try:
        try:
            rotated = await _rotate(read, settings, summarise, fold, now)
        finally:
            await cancel_and_wait(keeper)  # a renewal's answer can swallow one cancel
    except BaseException:
        await _release(pool, thread, version)
        _rotation_ended(thread)
        raise
    if rotated[0] is read.state:
        await _release(pool, thread, version)
        _rotation_ended(thread)
    return rotated


async def read_thread(pool: aiopg.Pool, thread: str, settings: Settings, split: Split,
                      summarise: Summariser, fold: Folder, now: datetime) -> ThreadRead:
    """The thread's state and live history, rotated when due and saved once.

    Raises ``unavailable()`` when the database fails; the summary model's own failures are
    the rotation's business (back-off, history cap).
    """
    x = max(1, int(settings.CACHE_PARTITION_X))
    try:
        return await _read_and_rotate(pool, thread, settings, x, split, summarise, fold, now)
    except DATABASE_ERRORS as exc:
        log.warning("partition context unavailable: %s", type(exc).__name__)
        raise unavailable() from exc


async def _read_and_rotate(pool: aiopg.Pool, thread: str, settings: Settings, x: int, split: Split,
                           summarise: Summariser, fold: Folder, now: datetime) -> ThreadRead:
    poll, attempts = _POLL_FIRST, 0
    while True:
        read = await _read(pool, thread, x, split)
        if not _due(read, settings, x, now):
            return read
        if read.state.rotating:  # another request is summarising these rounds: its result
            await _wait_for_rotation(thread, poll)
            poll = min(_POLL_MAX, poll * 2)
            continue
        attempts += 1
        if attempts > _SAVE_ATTEMPTS:
            log.warning("partition rotation kept losing to concurrent writes; not rotated")
            return read
        expected = read.state.version
        if settings.CACHE_SUMMARY_MODEL:
            async with cursor(pool) as cur:
                claimed = await claim_rotation(cur, read.state, LEASE_SECONDS)
            if claimed is None:
                continue
            expected = claimed
            state, history = await _rotate_leased(pool, read, expected, settings, summarise,
                                                  fold, now)
        else:
            state, history = await _rotate(read, settings, summarise, fold, now)
        if state is read.state:
            return read
        try:
            async with cursor(pool) as cur:
                saved = await save_state_if(cur, state, expected)
        finally:
            _rotation_ended(thread)
        if saved:  # once, whatever the number of rotations
            read.state = replace(state, version=expected + 1, rotating=False)
            read.history = history
            return read
