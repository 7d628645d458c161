"""Shutdown stops loops that lost a cancellation: on Python 3.11 ``asyncio.wait_for`` (aiopg's
wait for each statement's answer) returns the answer instead of raising when the cancel lands
in the loop iteration the answer arrives in, and the saved settings' re-read then ran on every
3 s while the app's cleanup waited for it (test teardowns hung until pytest-timeout)."""

from __future__ import annotations

import asyncio
import random

import pytest

from pawwake import live_settings
from pawwake.cancelling import cancel_and_wait
from pawwake.db.pool import create_pool
from pawwake.live_settings import RuntimeConfig
from pawwake.settings import Settings
from pawwake.tasks import running_beside

CLOSES = 100  # about 6 in 100 closes at a random moment lost the cancel before


async def _answer_then_loop(answer: asyncio.Future[None]) -> None:
    """A statement's wait for its answer, then the 3-second loop of a settings re-read."""
    await asyncio.wait_for(answer, 10)
    for _ in range(1000):
        await asyncio.sleep(3)


async def _lost_cancellation() -> asyncio.Task[None]:
    """A task whose first cancel lands as its statement's answer arrives."""
    answer = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(_answer_then_loop(answer))
    await asyncio.sleep(0)
    answer.set_result(None)
    task.cancel()
    return task


async def test_a_loop_that_lost_its_cancellation_is_stopped() -> None:
    task = await _lost_cancellation()
    assert await cancel_and_wait(task)
    assert task.cancelled()


async def test_a_task_that_will_not_stop_is_given_up_on_in_time() -> None:
    letting_go = asyncio.Event()

    async def stubborn() -> None:
        while not letting_go.is_set():
            try:
                await asyncio.sleep(1)
            except asyncio.CancelledError:
                pass

    task = asyncio.create_task(stubborn())
    await asyncio.sleep(0)
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert not await cancel_and_wait(task, 0.2)
    assert loop.time() - started < 1.0
    letting_go.set()
    assert await cancel_and_wait(task)


async def test_work_beside_the_app_stops_after_a_lost_cancellation() -> None:
    loop = asyncio.get_running_loop()
    answer = loop.create_future()
    started = loop.time()
    async with running_beside(_answer_then_loop(answer), name="warm-vector-index"):
        await asyncio.sleep(0)
        answer.set_result(None)  # the block ends as the answer arrives: the cancel is lost
    assert loop.time() - started < 1.0


async def test_the_settings_re_read_stops_whenever_it_is_closed(
        database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(live_settings, "REFRESH_SECONDS", 0.001)  # a statement every loop
    pool = await create_pool(database_url, maxsize=2)
    try:
        for _ in range(CLOSES):
            config = RuntimeConfig(Settings.from_env({}, DATABASE_URL=database_url))
            await config.attach(pool)
            following = config._following
            assert following is not None
            await asyncio.sleep(random.random() * 0.004)
            started = asyncio.get_running_loop().time()
            await asyncio.wait_for(config.close(), 2)
            assert following.done()
            assert asyncio.get_running_loop().time() - started < 1.5
    finally:
        pool.close()
        await pool.wait_closed()
