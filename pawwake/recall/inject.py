"""Injecting recalled fragments into a chat turn: the block's text and the seen-TTL marks.

The partition cache calls ``fragments_to_exclude`` before searching (so seen fragments give
way to the next ones), puts ``format_retrieved_conversations`` into the current turn, and calls
``mark_fragments_seen`` only after the reply succeeded.
"""

from __future__ import annotations

from collections.abc import Sequence

import aiopg

from pawwake.chat.prepared import NOTHING, ReplyHook, StepContext, StepInput, StepResult
from pawwake.db import fragments as db
from pawwake.db.pool import cursor, transaction
from pawwake.db.turn_injections import FragmentEntry
from pawwake.llm.sse import CapturedReply
from pawwake.local_time import local_minute, zone_at
from pawwake.recall.faces import ConversationRecall
from pawwake.recall.fragments import Fragment
from pawwake.recall.search import search_fragments
from pawwake.text.query import users_words
from pawwake.text.rounds import last_user_text

SPEAKERS = {"user": "用户", "assistant": "AI"}


def format_retrieved_conversations(fragments: Sequence[Fragment],
                                   timezone_hours: float) -> str:
    """The ``<retrieved_conversations>`` block, one line per message, a blank line between
    fragments; empty text when there is nothing to inject."""
    zone = zone_at(timezone_hours)
    blocks = []
    for fragment in fragments:
        lines = []
        for message in fragment.get("messages") or ():
            speaker = SPEAKERS.get(message.get("role"), "")
            text = " ".join(str(message.get("content") or "").split())
            if not speaker or not text:
                continue
            lines.append(f"[{local_minute(message['created_at'], zone)}]"
                         f" {speaker}: {text}")
        if lines:
            blocks.append("\n".join(lines))
    if not blocks:
        return ""
    return "<retrieved_conversations>\n" + "\n\n".join(blocks) + "\n</retrieved_conversations>"


async def fragments_to_exclude(pool: aiopg.Pool, session_id: str, ttl_hours: float
                               ) -> set[str]:
    """Fragment ids injected into ``session_id`` within the TTL (0 = no seen filtering)."""
    if ttl_hours <= 0:
        return set()
    async with cursor(pool) as cur:
        return await db.seen_within(cur, session_id, ttl_hours)


async def mark_fragments_seen(pool: aiopg.Pool, session_id: str,
                              fragment_ids: Sequence[str], ttl_hours: float) -> None:
    """Record injected fragments after a successful reply; each id keeps its own time."""
    if ttl_hours <= 0 or not fragment_ids:
        return
    async with transaction(pool) as cur:
        await db.mark_seen(cur, session_id, list(dict.fromkeys(fragment_ids)))


async def recalled_fragments(recall: ConversationRecall, context: StepContext,
                             request: StepInput) -> StepResult:
    """Past conversation fragments into the current turn.

    Partition mode only (the gateway owns the history there); the current thread is left out
    except what already slid out of the live zones (its zone start comes from the state the
    partition step read), fragments seen within CONVERSATION_SEEN_TTL_HOURS give way to the
    next ones, and seen marks are written only after a successful reply.
    """
    settings = context.settings
    limit = settings.MAX_CONVERSATIONS_INJECT
    thread = request.thread
    if (context.database is None or thread is None or not settings.CONVERSATION_RECALL_ENABLED
            or not settings.CACHE_PARTITION_ENABLED or limit <= 0):
        return NOTHING
    # what the user asked, without the blocks a client wraps it in (as memory search)
    query = users_words(last_user_text(list(request.turn_messages)))
    if not query.strip():
        return NOTHING
    pool = context.database.pool
    ttl = settings.CONVERSATION_SEEN_TTL_HOURS
    seen = await fragments_to_exclude(pool, thread.thread_id, ttl)
    # Messages before the zone start row in the thread's (created_at, id) order slid out of
    # zones A/B (imported ids need not follow dates); without a zone start, none did.
    outcome = await search_fragments(recall, query, max_sessions=limit,
                                     exclude_session_ids=[thread.thread_id],
        exclude_fragment_ids=seen, settings=settings, now=context.clock(),
        keep_excluded_below=thread.state.zone_start_message_id or 0)
    block = format_retrieved_conversations(outcome.fragments, settings.TIMEZONE_HOURS)
    if not block:
        return NOTHING
    injected: tuple[FragmentEntry, ...] = tuple(
        {"kind": "fragment", "id": f["fragment_id"], "session_id": f["session_id"],
         "score": round(float(f["score"]), 4),
         "text": "\n".join(f"{m['role']}: {m['content']}" for m in f["messages"])}
        for f in outcome.fragments)
    ids = [str(f["fragment_id"]) for f in outcome.fragments]
    return StepResult(turn_blocks=(block,), injected=injected,
                      hooks=(seen_fragments(pool, thread.thread_id, ids, ttl),))


def seen_fragments(pool: aiopg.Pool, session_id: str, ids: list[str], ttl_hours: float
                   ) -> ReplyHook:
    """Injected fragments give way to others in this thread for the TTL, once the reply
    succeeded."""

    async def mark(_reply: CapturedReply) -> None:
        await mark_fragments_seen(pool, session_id, ids, ttl_hours)

    return ReplyHook("mark fragments seen", on_success=mark)
