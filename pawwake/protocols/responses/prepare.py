"""A Responses request through the chat pipeline: persona, reminders and memories go into
``instructions``; the client's ``input`` items are forwarded as sent.

Partition mode is not applied here: it rebuilds the history from the database, while a
Responses client either resends its own items (Codex: reasoning items with encrypted content,
tool calls of its own kinds) or lets the provider keep the history (``previous_response_id``).
Neither can be replaced by stored chat rows, so memory is injected the plain way, with partition
mode off for the step; recall of past conversations, a partition feature, does not run:

    responses_steps(...) = (memories,)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pawwake.chat.auxiliary import is_title_request, skip_requested
from pawwake.chat.memory_step import MemoryStepParts, memories
from pawwake.chat.pipeline import drop_gateway_fields, run_steps
from pawwake.chat.prepared import BoundStep, ChatRejected, PreparedChat, Steps
from pawwake.protocols.responses.items import input_messages, with_instructions
from pawwake.protocols.responses.request import responses_session_id
from pawwake.settings import Settings

if TYPE_CHECKING:
    from pawwake.chat.resources import ChatFlow

PROTOCOL = "responses"
def responses_steps(memory: MemoryStepParts) -> Steps:
    """A Responses request's steps: memories only, placed plainly (bound by the assembly)."""
    return (BoundStep(memories, memory),)


@dataclass
class PreparedResponses(PreparedChat):
    """A PreparedChat whose added text goes into ``instructions``; stored rows say
    ``metadata.protocol = "responses"``."""

    protocol: str = PROTOCOL

    def finalize(self, untouched: bytes | None = None) -> None:
        if untouched is not None:
            self.payload = untouched
            return
        added = self.system_parts + self.turn_blocks
        if added:
            self.body["instructions"] = with_instructions(self.body.get("instructions"),
                                                          "\n\n".join(added))
        self.payload = json.dumps(self.body, ensure_ascii=False,
                                  separators=(",", ":")).encode("utf-8")


def apply_rewrites(body: dict[str, Any], settings: Settings) -> None:
    """REASONING_EFFORT in the Responses shape (``reasoning.effort``)."""
    if settings.REASONING_EFFORT:
        reasoning = body.get("reasoning")
        body["reasoning"] = {**(reasoning if isinstance(reasoning, dict) else {}),
                             "effort": settings.REASONING_EFFORT}


async def prepare_responses(flow: ChatFlow, settings: Settings, headers: Mapping[str, str],
                            body: dict[str, Any], raw: bytes, received_at: datetime
                            ) -> PreparedResponses:
    """Turn a validated Responses body into what goes upstream and what happens afterwards."""
    model = body.get("model") or settings.DEFAULT_MODEL
    if not model:
        raise ChatRejected(400, "missing_model",
                           "No model given and DEFAULT_MODEL is not set.", param="model")
    messages = input_messages(body.get("input"))
    auxiliary = skip_requested(headers) or is_title_request(messages)
    prepared = PreparedResponses(
        body={**body, "model": model}, client_messages=messages,
        client_session_id=responses_session_id(headers, body, messages), model=model,
        stream=bool(body.get("stream")), auxiliary=auxiliary,
        persist=flow.database is not None and not auxiliary, received_at=received_at)
    if auxiliary:
        prepared.finalize(untouched=raw if body.get("model") else None)
        return prepared
    apply_rewrites(prepared.body, settings)
    drop_gateway_fields(prepared.body)
    plain = settings.with_values({"CACHE_PARTITION_ENABLED": False}) \
        if settings.CACHE_PARTITION_ENABLED else settings
    await run_steps(flow, settings, prepared, flow.chat.responses_steps,
                    step_settings=plain)
    prepared.finalize()
    return prepared
