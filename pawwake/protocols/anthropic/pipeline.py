"""A Messages request through the chat pipeline: the same persona, memory steps, turn writer
and after-reply work, with the gateway's text placed the Messages way. Its steps, in order:

    messages_steps(...) = (messages_partition_context, memories, recalled_fragments)

The steps read the request's chat view (``chat_view``) for the question and session; the
turn writer stores that view, whose messages carry their original content blocks. In
partition mode the history comes from the thread (``partition``); otherwise the client's
history goes upstream as sent (see ``placement``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pawwake.chat.auxiliary import is_auxiliary
from pawwake.chat.memory_step import MemoryStepParts, memories
from pawwake.chat.pipeline import drop_gateway_fields, run_steps
from pawwake.chat.prepared import BoundStep, ChatRejected, ChatStep, PreparedChat
from pawwake.partition.step import PartitionParts
from pawwake.protocols.anthropic.partition import messages_partition_context
from pawwake.protocols.anthropic.placement import with_system_after, with_turn_context
from pawwake.protocols.anthropic.request import chat_view, messages_session_id
from pawwake.recall.faces import ConversationRecall
from pawwake.recall.inject import recalled_fragments
from pawwake.settings import Settings

if TYPE_CHECKING:
    from pawwake.chat.resources import ChatFlow

def messages_steps(partition: PartitionParts, memory: MemoryStepParts,
                   recall: ConversationRecall) -> tuple[ChatStep, ...]:
    """A Messages request's steps in order, each bound to its face (by the assembly)."""
    return (BoundStep(messages_partition_context, partition), BoundStep(memories, memory),
            BoundStep(recalled_fragments, recall))


@dataclass
class PreparedMessages(PreparedChat):
    """A PreparedChat whose upstream body is a Messages body."""

    client_headers: Mapping[str, str] = field(default_factory=dict)
    query: str = ""

    def finalize(self, untouched: bytes | None = None) -> None:
        if untouched is not None:
            self.payload = untouched
            return
        if self.system_parts:
            self.body["system"] = with_system_after(self.body.get("system"),
                                                    "\n\n".join(self.system_parts))
        if self.turn_blocks:
            self.body["messages"] = with_turn_context(self.body["messages"],
                                                      "\n\n".join(self.turn_blocks))
        self.payload = json.dumps(self.body, ensure_ascii=False,
                                  separators=(",", ":")).encode("utf-8")


async def prepare_messages(flow: ChatFlow, settings: Settings, headers: Mapping[str, str],
                           body: dict[str, Any], raw: bytes, received_at: datetime
                           ) -> PreparedMessages:
    """Turn a validated Messages body into what goes upstream and what happens afterwards."""
    model = body.get("model") or settings.DEFAULT_MODEL
    if not model:
        raise ChatRejected(400, "missing_model",
                           "model: no model given and DEFAULT_MODEL is not set.")
    view = chat_view(body["messages"])
    system = body.get("system")
    # Title requests are told apart as in chat, the system prompt counting as a system message.
    seen = [{"role": "system", "content": system}, *view] if system else view
    auxiliary = is_auxiliary(headers, {"messages": seen})
    upstream = {**body, "model": model}
    prepared = PreparedMessages(
        body=upstream, client_messages=view,
        client_session_id=messages_session_id(headers, body, view), model=model,
        stream=bool(body.get("stream")), auxiliary=auxiliary,
        persist=flow.database is not None and not auxiliary, received_at=received_at,
        client_headers=headers)
    if auxiliary:
        prepared.finalize(untouched=raw if body.get("model") else None)
        return prepared
    drop_gateway_fields(upstream)
    await run_steps(flow, settings, prepared, flow.chat.messages_steps)
    if not prepared.system_parts and not prepared.turn_blocks \
            and prepared.body.keys() == body.keys():
        prepared.finalize(untouched=raw)  # nothing to add: the client's own bytes go on
    else:
        prepared.finalize()
    return prepared
