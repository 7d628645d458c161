"""A switch of client mid-thread in partition mode (X = 2): client A sends its whole history,
its own system prompt and session id; client B sends only the latest message with another
system prompt and session id. The upstream context must not depend on which client speaks."""

from __future__ import annotations

from typing import Any

from pawwake.db.pool import transaction
from pawwake.services import services_of
from tests.partition_support import CC, PARTITION, a, now_turn, say, state_row, system, u

PERSONA = "你是小爪。"


def a_style(history: list[tuple[str, str]], text: str) -> list[dict[str, Any]]:
    """Client A: its own system prompt, every earlier round, then the new message."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are client A."}]
    for question, answer in history:
        messages += [{"role": "user", "content": question},
                     {"role": "assistant", "content": answer}]
    return [*messages, {"role": "user", "content": text}]


def b_style(text: str) -> list[dict[str, Any]]:
    """Client B: another system prompt and only the latest message."""
    return [{"role": "system", "content": "Client B system prompt."},
            {"role": "user", "content": text}]


async def run(client: Any, upstream: Any, switch_after: int
              ) -> list[list[dict[str, Any]]]:
    """Six rounds; A speaks the first ``switch_after`` of them, B the rest."""
    history: list[tuple[str, str]] = []
    sent_bodies = []
    for n in range(1, 7):
        question, answer = f"问{n} question", f"答{n} answer"
        if n <= switch_after:
            messages = a_style(history, question)
            client.session.headers["X-Session-Id"] = "client-a"
        else:
            messages = b_style(question)
            client.session.headers["X-Session-Id"] = "client-b"
        summary = f"摘要{n}" if n == 5 else None
        sent_bodies.append(await say(client, upstream, question, answer, summary=summary,
                                     messages=messages))
        history.append((question, answer))
    return sent_bodies


async def test_switching_client_mid_thread_gives_the_same_upstream_context(
        gateway: Any, upstream: Any) -> None:
    client = await gateway(persona=PERSONA, CACHE_SUMMARY_MODEL="test/summary", **PARTITION)
    bodies = await run(client, upstream, switch_after=3)
    q = [f"问{n} question" for n in range(1, 7)]
    r = [f"答{n} answer" for n in range(1, 7)]
    # Rounds 1-3 from A (whole history), 4-6 from B (latest only): the context is built from
    # the stored thread either way, and neither client's system prompt nor session id shows.
    assert bodies[3] == [system(PERSONA), u(q[0]), a(r[0]), u(q[1]), a(r[1], CC), u(q[2]),
                         a(r[2], CC), now_turn(q[3])]
    # The first rotation still comes at round 2X + 1 = 5, after the switch.
    assert bodies[4] == [system(PERSONA, ["摘要5"]), u(q[2]), a(r[2]), u(q[3]), a(r[3], CC),
                         now_turn(q[4])]
    assert bodies[5] == [system(PERSONA, ["摘要5"]), u(q[2]), a(r[2]), u(q[3]), a(r[3], CC),
                         u(q[4]), a(r[4], CC), now_turn(q[5])]
    state = await state_row(client)
    assert state is not None and state["rotations"] == 1


async def test_a_and_b_style_runs_give_identical_bodies_round_by_round(
        gateway: Any, upstream: Any) -> None:
    """The same script twice on an emptied thread: A throughout, then A switching to B after
    two rounds. Every upstream body, rotations included, is the same in both runs."""
    client = await gateway(persona=PERSONA, CACHE_SUMMARY_MODEL="test/summary", **PARTITION)
    only_a = await run(client, upstream, switch_after=6)
    pool = services_of(client.server.app).database.pool
    async with transaction(pool) as cur:
        await cur.execute("DELETE FROM partition_state")
        await cur.execute("DELETE FROM conversations")
    switched = await run(client, upstream, switch_after=2)
    assert switched == only_a
    assert only_a[4][0] == system(PERSONA, ["摘要5"])
