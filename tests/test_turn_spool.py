"""PostgreSQL stopped and started during chats: every finished turn reaches the database
once, in order (the spool on disk holds them meanwhile). Runs its own embedded server, so
stopping it leaves the session's server alone."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg2
import pytest

from pawwake.conversations import turn_spool, turn_writer
from pawwake.conversations.turn_spool import TurnSpool, decode, encode
from pawwake.db.embedded import start_embedded, stop_embedded
from pawwake.llm.sse import CapturedReply
from pawwake.services import services_of
from tests.conditions import until
from tests.fake_upstream import FakeUpstream
from tests.gateway_support import GatewayStarter
from tests.turn_support import turn_rows

SESSION = {"X-Session-Id": "s-spool"}


@pytest.fixture
def own_postgres() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="pawwake-spool-pg-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


async def chat(client: Any, upstream: FakeUpstream, history: list[dict[str, Any]],
               number: int, *, stream: bool) -> None:
    question = {"role": "user", "content": f"问{number}"}
    upstream.reply_text(f"答{number}")
    response = await client.post("/v1/chat/completions", headers=SESSION, json={
        "model": "test/model-a", "stream": stream, "messages": [*history, question]})
    assert response.status == 200
    await response.read()
    history += [question, {"role": "assistant", "content": f"答{number}"}]


async def test_turns_survive_a_database_stop_and_start_exactly_once_in_order(
        gateway: GatewayStarter, upstream: FakeUpstream, own_postgres: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The store retries and the replay loop run as in production; only their pauses are
    # shorter here (each chat while the database is down waited 0.6 s, the replay up to 5 s).
    monkeypatch.setattr(turn_writer, "_RETRY_DELAYS", (0.01, 0.05))
    monkeypatch.setattr(turn_spool, "REPLAY_EVERY_SECONDS", 0.2)
    server = await asyncio.to_thread(start_embedded, own_postgres)
    try:
        app = gateway.build(DATABASE_URL=server.get_uri())
        client = await gateway.start(app)
        history: list[dict[str, Any]] = []
        for number in range(4):
            await chat(client, upstream, history, number, stream=number % 2 == 0)
        await asyncio.to_thread(stop_embedded, server)
        for number in range(4, 10):
            await chat(client, upstream, history, number, stream=number % 2 == 0)
        await services_of(app).tasks.drain()
        health = await (await client.get("/")).json()
        assert health["turn_spool"] == {"pending": 6, "dropped": 0, "failed": 0}
        server = await asyncio.to_thread(start_embedded, own_postgres)
        spool = services_of(app).turn_spool
        for _ in range(300):  # the replay loop tries again after its pause
            if not spool.pending:
                break
            await asyncio.sleep(0.1)
        for number in range(10, 13):
            await chat(client, upstream, history, number, stream=True)
        await services_of(app).tasks.drain()
        rows = await turn_rows(app, "s-spool")
        assert [r["content"] for r in rows] == [m["content"] for m in history]
        assert spool.status() == {"pending": 0, "dropped": 0, "failed": 0}
        assert not list(spool.folder.iterdir())
    finally:
        await asyncio.to_thread(stop_embedded, server)


class _Turn:
    def __init__(self, key: str) -> None:
        self.session_id = "s"
        self.model = "m"
        self.turn_messages = [{"role": "user", "content": "x" * 100}]
        self.turn_key = key


async def test_a_full_spool_keeps_the_oldest_and_counts_the_dropped(tmp_path: Path) -> None:
    spool = TurnSpool(tmp_path / "spool", max_bytes=1500)
    spool.open()
    reply = CapturedReply(content="y" * 100, finish_reason="stop", done=True)
    results = [await spool.add(_Turn(f"k{n}"), reply, incomplete=False) for n in range(5)]
    assert results[:2] == [True, True] and results[-1] is False
    kept = sorted(p.name for p in spool.folder.glob("*.json"))
    assert [decode((spool.folder / name).read_bytes())[0].turn_key for name in kept] == [
        f"k{n}" for n in range(results.count(True))]
    assert spool.status()["dropped"] == results.count(False)
    spool.close()  # the process ends; the next one finds what it left
    reopened = TurnSpool(tmp_path / "spool", max_bytes=1500)
    reopened.open()
    assert reopened.pending == results.count(True)


def test_a_spooled_turn_keeps_what_the_writer_needs() -> None:
    turn = _Turn("k")
    turn.turn_messages = [{"role": "user", "content": "a"}, {"role": "assistant",
                            "content": "b"}, {"role": "user", "content": "c\ud800"}]
    reply = CapturedReply(content="d", finish_reason="stop", done=True,
                          raw_usage={"prompt_tokens": 1, "completion_tokens": 2})
    turn.injected = [{"kind": "memory", "id": 7, "text": "用户的猫叫小橘", "score": 0.8}]  # type: ignore[attr-defined]
    back, captured, incomplete = decode(encode(turn, reply, incomplete=True))
    assert back.turn_messages == turn.turn_messages[1:]
    assert back.injected == [{"kind": "memory", "id": 7, "score": 0.8}]  # the memory page counts it
    assert captured.usage is not None and captured.usage.completion == 2
    assert incomplete is True


async def spool_turns(spool: TurnSpool, keys: list[str]) -> None:
    reply = CapturedReply(content="y", finish_reason="stop", done=True)
    for key in keys:
        assert await spool.add(_Turn(key), reply, incomplete=False)


async def test_processes_sharing_a_data_folder_each_replay_only_their_own_turns(
        tmp_path: Path) -> None:
    """Replicas that mount one volume: every spooled turn is written once, by one of them."""
    first, second = (TurnSpool(tmp_path / "turn-spool", max_bytes=10**6) for _ in range(2))
    first.open()
    await spool_turns(first, ["a1", "a2"])
    second.open()
    await spool_turns(second, ["b1", "b2", "b3"])
    assert first.folder != second.folder
    assert (first.pending, second.pending) == (2, 3)
    stored: list[str] = []

    async def store(turn: Any, _reply: CapturedReply, _incomplete: bool) -> None:
        stored.append(turn.turn_key)
        await asyncio.sleep(0)

    await asyncio.gather(first.replay(store), second.replay(store))
    assert sorted(stored) == ["a1", "a2", "b1", "b2", "b3"]
    assert first.status() == second.status() == {"pending": 0, "dropped": 0, "failed": 0}
    first.close()
    second.close()


async def test_the_turns_of_a_process_gone_from_a_shared_folder_are_adopted_once_in_order(
        tmp_path: Path) -> None:
    live, gone = (TurnSpool(tmp_path / "turn-spool", max_bytes=10**6) for _ in range(2))
    live.open()
    await spool_turns(live, ["k1"])
    gone.open()
    await spool_turns(gone, ["k2", "k3"])
    assert await live.adopt_orphans() == 0  # its owner is still alive
    gone_folder = gone.folder
    gone.close()  # the process ended (a kill releases the lock the same way)
    assert await live.adopt_orphans() == 2
    assert live.pending == 3 and not list(gone_folder.glob("*.json"))
    stored: list[str] = []

    async def store(turn: Any, _reply: CapturedReply, _incomplete: bool) -> None:
        stored.append(turn.turn_key)

    await live.replay(store)
    assert stored == ["k1", "k2", "k3"]  # the order they finished in
    restarted = TurnSpool(tmp_path / "turn-spool", max_bytes=10**6)
    restarted.open()
    assert restarted.pending == 0
    live.close()
    restarted.close()


async def test_a_stream_ends_only_once_its_turn_is_safe_when_the_store_is_slow(
        gateway: GatewayStarter, upstream: FakeUpstream, database_url: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The database answers, but slowly (here: the session's write lock is held elsewhere):
    the end of the stream came with the turn only in memory, and a process killed then lost
    a turn its user had seen finish. Now a copy is on disk first; it adds nothing later."""
    monkeypatch.setattr(turn_writer, "SPOOL_COPY_AFTER_SECONDS", 0.3)
    app = gateway.build()
    client = await gateway.start(app)
    blocker = psycopg2.connect(database_url)
    try:
        with blocker.cursor() as cur:  # a transaction holding the session's write lock
            cur.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                        ("conversations:s-slow",))
        upstream.reply_text("慢慢来")
        response = await client.post("/v1/chat/completions", headers={
            "X-Session-Id": "s-slow"}, json={"model": "test/model-a", "stream": True,
                                             "messages": [{"role": "user", "content": "在吗"}]})
        assert b"[DONE]" in await response.read()
        spool = services_of(app).turn_spool
        assert spool.pending == 1  # the turn was on disk when the stream ended
        assert await turn_rows(app, "s-slow") == []
    finally:
        blocker.rollback()
        blocker.close()
    await services_of(app).tasks.drain()
    await until(lambda: spool.pending == 0)
    assert [r["content"] for r in await turn_rows(app, "s-slow")] == ["在吗", "慢慢来"]
    assert spool.status() == {"pending": 0, "dropped": 0, "failed": 0}
