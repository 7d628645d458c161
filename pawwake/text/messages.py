"""Chat messages as the gateway reads them: OpenAI-style messages (what every protocol's
request becomes in the chat pipeline, and what goes upstream) and stored messages (a
conversation row as the rounds, the partition cache and extraction read it back)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final, Required, TypedDict

# A message of another protocol, seen as a chat message, carries what to keep of its original
# form (its protocol, its content blocks) under this key; it is stored in the row's metadata.
GATEWAY_METADATA: Final = "_pawwake_metadata"


class ToolCall(TypedDict, total=False):
    """``{"id", "type": "function", "function": {"name", "arguments"}}`` as a provider sent it."""

    id: str
    type: str
    function: dict[str, Any]


class ChatMessage(TypedDict, total=False):
    """An OpenAI-style message. On the way in only ``role`` is checked
    (``chat/request_body.py``): readers still check the other values' types, and keys of
    other providers pass through untouched (kept as ``extras`` when stored)."""

    role: Required[str]
    content: str | list[dict[str, Any]] | None
    name: str
    tool_calls: list[ToolCall]
    tool_call_id: str | None  # None: a result that names no call (it is stored as it came)
    reasoning_content: str
    _pawwake_metadata: dict[str, Any]  # ``GATEWAY_METADATA``: never sent upstream


class MessageSkeleton(TypedDict):
    """A stored message's role and ``metadata``: what a replay to the provider needs besides
    the text (``tool_calls``, ``tool_call_id``, ``name``, ``reasoning_content``, ``extras``)
    and what the gateway notes (``incomplete``, ``attachments``, another protocol's own
    form), an open JSON object. Enough to count rounds (``db/extraction.py``)."""

    role: str
    metadata: dict[str, Any]


class TailMessage(MessageSkeleton):
    """A stored message the turn planner compares (``db/conversations.py`` ``session_tail``)."""

    id: int
    content: str


class StoredMessage(TailMessage):
    """A stored message read back in order (``db/partition_state.py``,
    ``db/extraction.py``)."""

    created_at: datetime


# What the rounds group: a client's messages or stored ones.
Message = ChatMessage | MessageSkeleton
