"""Recognise auxiliary requests (a client's own title generation) that must not be remembered.

Chat clients ask the same model for a short title of the conversation they just had, as one
user message (sometimes after a system message) that quotes the dialogue. Those requests are
forwarded untouched: no persona, no memory, not stored.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

SKIP_HEADER = "X-Skip-Conversation-Log"

# A plain "summarise this chat" is a real user request; only a title/name counts here.
_ASKS_TITLE = re.compile(
    r"\btitle\b|\bname (?:this|the) (?:conversation|chat)\b|\ba (?:short |concise )?name\b"
    r"|标题|主题|题目", re.IGNORECASE)
_ABOUT_CONVERSATION = re.compile(
    r"\bconversation\b|\bchat\b|\bdialog(?:ue)?\b|\bmessages?\b|对话|会话|聊天", re.IGNORECASE)
_SHORT = re.compile(
    r"\bshort\b|\bconcise\b|\bbrief\b|\bsuccinct\b|\bmax(?:imum)?\b|\bwithin\b|\bunder\b"
    r"|\b\d+\s*(?:-\s*\d+\s*)?(?:words?|characters?|chars?)\b"
    r"|简短|简要|简洁|以内|之内|不超过|\d+\s*个?字", re.IGNORECASE)

_TITLE_WORDS = ("title", "name", "标题", "主题", "题目")  # every _ASKS_TITLE match has one
_EDGE_CHARS = 600  # instructions sit before or after the quoted dialogue


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(part.get("text", "") for part in content
                         if isinstance(part, dict) and isinstance(part.get("text"), str))
    return ""


def _edges(text: str) -> str:
    if len(text) <= 2 * _EDGE_CHARS:
        return text
    return text[:_EDGE_CHARS] + "\n" + text[-_EDGE_CHARS:]


def is_title_request(messages: list[Any]) -> bool:
    """One user message (plus optional system text) asking for a short title or name of
    "the conversation", and no assistant or tool turn: that is a client's title request."""
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    others = [m for m in messages if isinstance(m, dict)
              and m.get("role") not in ("user", "system", "developer")]
    if len(users) != 1 or others:
        return False
    instructions = "\n".join(_edges(_text(m.get("content"))) for m in messages
                             if isinstance(m, dict))
    lowered = instructions.lower()
    if not any(word in lowered for word in _TITLE_WORDS):  # cheap test first: every new chat
        return False
    return bool(_ASKS_TITLE.search(instructions) and _ABOUT_CONVERSATION.search(instructions)
                and _SHORT.search(instructions))


def skip_requested(headers: Mapping[str, str]) -> bool:
    return headers.get(SKIP_HEADER, "").strip().lower() in ("1", "true", "yes", "on")


def is_auxiliary(headers: Mapping[str, str], body: Mapping[str, Any]) -> bool:
    """Forward untouched and remember nothing: asked by header, or a title request."""
    messages = body.get("messages")
    return skip_requested(headers) or (isinstance(messages, list) and is_title_request(messages))
