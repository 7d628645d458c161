"""The chat step contract: steps are named in order, and only ``PreparedChat.apply`` turns
what a step returns into changes of the request."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from pawwake.chat.memory_step import memories
from pawwake.chat.prepared import PartitionThread, PreparedChat, ReplyHook, StepResult
from pawwake.db.partition_state import PartitionState
from pawwake.llm.sse import CapturedReply
from pawwake.partition.step import partition_context
from pawwake.protocols.anthropic.partition import messages_partition_context
from pawwake.recall.inject import recalled_fragments
from pawwake.services import build_services
from pawwake.settings import Settings

CLIENT = [{"role": "user", "content": "hi"}]


def request() -> PreparedChat:
    return PreparedChat(body={"model": "m", "messages": CLIENT}, client_messages=CLIENT,
                        client_session_id="client-session", model="m", stream=True,
                        auxiliary=False, persist=True, received_at=datetime.now(UTC))


async def _nothing(_reply: CapturedReply) -> None:
    return None


def test_the_steps_run_in_the_declared_order_each_bound_to_its_own_parts(tmp_path: Path
                                                                           ) -> None:
    services = build_services(Settings.from_env({"PAWWAKE_DATA_DIR": str(tmp_path)},
                                                DATABASE_ENABLED=True))
    chat = services.chat
    assert [step.run for step in chat.steps] == [partition_context, memories, recalled_fragments]
    assert [step.run for step in chat.messages_steps] == [messages_partition_context, memories,
                                                          recalled_fragments]
    assert [step.run for step in chat.responses_steps] == [memories]
    partition, memory, recall = (step.face for step in chat.steps)
    assert (memory.search, memory.tasks) == (services.memory_search, services.tasks)
    assert recall is services.recall
    assert partition.pending is chat.pending and partition.http is services.client
    assert partition.database_configured
    assert chat.messages_steps[0].face is partition
    assert chat.responses_steps[0].face is memory


def test_a_thread_moves_the_stored_session_and_messages_without_touching_the_clients() -> None:
    prepared = request()
    compared = [{"role": "assistant", "content": "stored"}, *CLIENT]
    prepared.apply(StepResult(system_parts=("persona",)))
    prepared.apply(StepResult(
        thread=PartitionThread("default", PartitionState("default"), compared),
        layout={"model": "m", "messages": [{"role": "system", "content": "persona"}, *CLIENT]}))
    assert (prepared.session_id, prepared.client_session_id) == ("default", "client-session")
    assert prepared.turn_messages == compared and prepared.client_messages == CLIENT
    assert prepared.system_parts == []  # the layout placed them
    assert prepared.body["messages"][0] == {"role": "system", "content": "persona"}


def test_hooks_that_must_precede_the_store_run_ahead_of_it_in_step_order() -> None:
    prepared = request()
    names = ["store the turn", "touch injected memories", "deliver reminders",
             "mark fragments seen", "another before the store"]
    hooks = {name: ReplyHook(name, on_success=_nothing, before_store="before" in name
                             or "deliver" in name) for name in names}
    prepared.apply(StepResult(hooks=(hooks["store the turn"],)))
    prepared.apply(StepResult(hooks=(hooks["touch injected memories"],
                                     hooks["deliver reminders"])))
    prepared.apply(StepResult(hooks=(hooks["mark fragments seen"],
                                     hooks["another before the store"])))
    assert [hook.name for hook in prepared.hooks] == [
        "deliver reminders", "another before the store", "store the turn",
        "touch injected memories", "mark fragments seen"]
