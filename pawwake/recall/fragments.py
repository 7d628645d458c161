"""A recalled fragment: one past session's best messages with their neighbours, as recall
search returns it, the chat step injects it and the API and MCP show it (JSON as it is)."""

from __future__ import annotations

from typing import TypedDict


class FragmentMessage(TypedDict):
    role: str
    content: str  # trimmed: a matched message keeps more than its neighbours
    created_at: str  # ISO 8601
    matched: bool  # one of the messages that matched the query (the others are context)


class Fragment(TypedDict):
    fragment_id: str  # stable for the same matched messages (``rank.fragment_id``)
    session_id: str
    score: float
    parts: dict[str, float]  # the best message's score parts
    latest_match_at: str  # ISO 8601
    messages: list[FragmentMessage]
