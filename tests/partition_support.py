"""Helpers for the partition cache tests: talk to the gateway one round at a time and read
back the exact upstream messages (the time note normalised)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pawwake.db.pool import cursor, fetch_one
from pawwake.services import services_of
from tests.fake_upstream import Reply, completion_body
from tests.gateway_support import settle

CLAUDE = "anthropic/claude-test"
CC = {"type": "ephemeral"}
CC_1H = {"type": "ephemeral", "ttl": "1h"}
PARTITION = {"CACHE_PARTITION_ENABLED": True, "CACHE_PARTITION_X": 2, "JOB_WORKERS": 0,
             "DEFAULT_MODEL": CLAUDE}
_TIME_NOTE = re.compile(r"^\[Current time: [^\]]+\]\n\n")


def u(text: str, marker: dict[str, str] | None = None) -> dict[str, Any]:
    return _message("user", text, marker)


def a(text: str, marker: dict[str, str] | None = None) -> dict[str, Any]:
    return _message("assistant", text, marker)


def _message(role: str, text: str, marker: dict[str, str] | None) -> dict[str, Any]:
    """A history message as Claude models get it: always a text-block list (one stable
    form), the breakpoint's marker on the block when given."""
    block: dict[str, Any] = {"type": "text", "text": text}
    if marker is not None:
        block["cache_control"] = marker
    return {"role": role, "content": [block]}


def system(persona: str | None, parts: Sequence[str] = (), marker: dict[str, str] = CC
           ) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = []
    if persona:
        blocks.append({"type": "text", "text": persona, "cache_control": marker})
    for index, part in enumerate(parts):
        text = f"Summary of the earlier conversation:\n{part}" if index == 0 else part
        block: dict[str, Any] = {"type": "text", "text": text}
        if index == len(parts) - 1:
            block["cache_control"] = marker
        blocks.append(block)
    return {"role": "system", "content": blocks}


def now_turn(text: str) -> dict[str, Any]:
    """The current user turn as the tests compare it (time note replaced by [TIME])."""
    return {"role": "user", "content": f"[TIME]\n\n{text}"}


def normalised(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages with the time note of the (last) user turn replaced by ``[TIME]``."""
    out = [dict(m) for m in messages]
    for message in reversed(out):
        if message.get("role") == "user":
            content = message["content"]
            if isinstance(content, str):
                assert _TIME_NOTE.match(content), content
                message["content"] = _TIME_NOTE.sub("[TIME]\n\n", content)
            break
    return out


async def say(client: Any, upstream: Any, text: str, reply: str, *,
              summary: str | None = None, model: str = CLAUDE,
              messages: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """One round through the gateway; returns the normalised upstream chat messages."""
    if summary is not None:
        upstream.queue(Reply(body=completion_body(summary)))
    upstream.reply_text(reply)
    body = {"model": model, "stream": False,
            "messages": messages or [{"role": "user", "content": text}]}
    response = await client.post("/v1/chat/completions", json=body)
    assert response.status == 200, await response.text()
    data = await response.json()
    assert data["choices"][0]["message"]["content"] == reply
    await settle(client)
    return normalised(upstream.requests[-1].body["messages"])


async def state_row(client: Any, thread: str = "default") -> dict[str, Any] | None:
    async with cursor(services_of(client.server.app).database.pool) as cur:
        return await fetch_one(cur,
                               "SELECT summary_parts, rotations, last_summary_error"
                               " FROM partition_state WHERE thread_id = %s", (thread,))
