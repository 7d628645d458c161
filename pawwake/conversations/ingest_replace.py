"""A continued turn's final reply replaces the one stored first.

Claude Code and Codex fire Stop again when another Stop hook made the model go on; the writer
then sends the same ``turn_id`` with ``replace_reply``. The stored turn keeps its rows (the
user text, its position, its id) and only its last assistant message takes the final text, in
the ingest transaction and under the session's write lock; the keyword index is refreshed and
the message's vector is computed again. An extraction already scheduled for the turn reads the
stored history when it runs, so it sees the final reply unless it ran in between.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pawwake.db import conversation_turns as turns_db
from pawwake.recall import index as conversation_index

if TYPE_CHECKING:
    from pawwake.recall.faces import ConversationRecall
    from pawwake.settings import Settings


async def replace_final_reply(recall: ConversationRecall, settings: Settings, cur: Any,
                              first_id: int, reply: str) -> int | None:
    """Put the continued turn's final ``reply`` into the stored turn that starts at
    ``first_id``; return the message id changed, or None when there is nothing to change (same
    text, a turn stored before turns recorded their length, or one whose reply is gone or
    edited away)."""
    rows = await turns_db.turn_rows(cur, first_id)
    if not rows:
        return None
    last = rows[-1]
    if last["role"] != "assistant" or last["deleted_at"] is not None or last["content"] == reply:
        return None
    await turns_db.set_content(cur, last["id"], reply)
    await conversation_index.reindex_messages(recall, cur, [(last["id"], reply)],
                                              settings=settings)
    return int(last["id"])
