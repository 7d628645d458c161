"""The turn store: a finished turn's rows written in one transaction, exactly once.

The transaction of a proxied turn writes what ``turn_plan`` decided (the reply row, or a lone
user message, carries the turn's key), the token usage and the injected record; sidecar
ingest (``ingest.py``) writes its turn under its own key. Both end the same way, in the same
transaction: ``index_and_schedule`` gives the new rows their recall terms (vectors by a job)
and enqueues memory extraction when the turn closes an interval, so both exist exactly when
the turn does. How a turn reaches this store (retries, the spool) is ``turn_writer``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import psycopg2

from pawwake.conversations.extraction_schedule import schedule_extraction
from pawwake.conversations.turn_plan import plan_turn, reply_message, trailing_call_ids
from pawwake.database import require_database
from pawwake.db import conversation_turns, conversations, usage
from pawwake.db import threads as threads_db
from pawwake.db.conversations import INCOMPLETE, NewMessage
from pawwake.db.pool import transaction
from pawwake.db.turn_injections import record_injection
from pawwake.llm.sse import CapturedReply
from pawwake.recall import index as conversation_index
from pawwake.settings import Settings
from pawwake.text.messages import ChatMessage

if TYPE_CHECKING:
    from pawwake.database import Database
    from pawwake.jobs import JobRunner
    from pawwake.live_settings import RuntimeConfig
    from pawwake.recall.faces import ConversationRecall

log = logging.getLogger(__name__)

SOURCE = "gateway"



@dataclass(frozen=True)
class TurnStore:
    """What storing a turn works with (proxied and ingested alike): the database, the settings
    in force (read when a store starts), conversation recall (the rows' index terms), and the
    job runner (woken for the jobs a turn queued)."""

    database: Database | None
    config: RuntimeConfig
    recall: ConversationRecall
    jobs: JobRunner


class TurnSource(Protocol):
    """What a store needs of a request (a PreparedChat, or a turn read back from the spool)."""

    @property
    def session_id(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def turn_messages(self) -> Sequence[ChatMessage]: ...  # what the client sent, as compared
    @property
    def turn_key(self) -> str: ...


@dataclass(frozen=True)
class Queued:
    """The jobs a stored turn enqueued in its transaction."""

    extraction_job: int | None = None
    embedding: bool = False

    @property
    def any(self) -> bool:
        """Wake the job runner once the transaction committed."""
        return self.embedding or self.extraction_job is not None


async def index_and_schedule(recall: ConversationRecall, cur: Any, settings: Settings, session_id: str,
                             indexed: Sequence[tuple[int, str]], *, extract: bool,
                             terms: Sequence[list[str]] | None = None) -> Queued:
    """What every stored turn does in its transaction once its rows are in: the rows recall
    searches (``indexed``: id and text) get their terms, cut here unless given (ingest cuts
    them before its transaction), and a vector job; with ``extract``, memory extraction is
    enqueued when the turn closed an interval."""
    embedding = bool(settings.CONVERSATION_RECALL_ENABLED)
    if embedding and terms is None:
        await conversation_index.reindex_messages(recall, cur, indexed, settings=settings)
    elif embedding:
        assert terms is not None
        await conversation_turns.set_search_terms(
            cur, [(message_id, cut) for (message_id, _), cut in zip(indexed, terms, strict=True)])
        await conversation_index.enqueue_embedding(cur)
    job = await schedule_extraction(cur, settings, session_id) if extract else None
    return Queued(job, embedding)


async def store_turn(store: TurnStore, turn: TurnSource, reply: CapturedReply,
                     *, incomplete: bool = False) -> bool:
    """Write the turn and its token usage in one transaction, serialised per session; False
    when the turn's key shows it was written before (a retry adds nothing).

    The same transaction keeps the recall index current and enqueues memory extraction when
    this turn closes an interval (``index_and_schedule``, as for ingested turns), so both
    happen exactly when the turn is stored.
    """
    database = require_database(store.database)
    settings = await store.config.fresh()
    model = turn.model
    call_ids = trailing_call_ids(turn.turn_messages)
    has_reply = bool(reply.content or reply.tool_calls or reply.reasoning_content)
    reply_row = reply_message(reply, model, incomplete=incomplete) \
        if has_reply or not incomplete else None
    try:
        async with transaction(database.pool) as cur:
            session_id = await _stored_under(cur, turn)
            tail = await conversations.session_tail(cur, session_id, lock=True)
            if await conversation_turns.find_turn(cur, SOURCE, session_id,
                                                  turn.turn_key) is not None:
                log.info("a turn written before was offered again; nothing added")
                return False
            stored_ids = await conversations.stored_tool_call_ids(cur, session_id,
                                                                  call_ids)
            plan = plan_turn(turn.turn_messages, tail, stored_ids, reply_row, model,
                             incomplete=incomplete)
            if not plan.insert:
                return False
            plan.insert[-1] = _with_key(plan.insert[-1], turn.turn_key)
            _label_protocol(plan.insert, turn, reply, reply_row)
            await conversations.delete_messages(cur, plan.replace_ids)
            await conversations.clear_incomplete(cur, plan.unflag_ids)
            ids = await conversations.insert_messages(cur, session_id, plan.insert,
                                                      source=SOURCE)
            await record_injection(cur, getattr(turn, "injected", ()), ids, plan.insert)
            indexed = [(message_id, message.content) for message_id, message in zip(
                ids, plan.insert, strict=True) if message.role in ("user", "assistant")
                and not message.metadata.get(INCOMPLETE)]
            indexed += [(row["id"], row["content"]) for row in tail
                        if row["id"] in plan.unflag_ids]
            queued = await index_and_schedule(store.recall, cur, settings, session_id, indexed,
                                              extract=not incomplete)
            if reply.usage is not None:
                await usage.insert_usage(
                    cur, session_id=session_id, model=model,
                    prompt_tokens=reply.usage.prompt, completion_tokens=reply.usage.completion,
                    total_tokens=reply.usage.total, cached_tokens=reply.usage.cached,
                    cache_creation_tokens=reply.usage.cache_creation, usage_type="chat",
                    cost=reply.usage.cost)
    except psycopg2.errors.UniqueViolation:
        log.info("a concurrent write of the same turn won; nothing added")
        return False
    if queued.any:
        store.jobs.wake()
    log.debug("stored %d messages (%d replaced%s) for a session", len(plan.insert),
              len(plan.replace_ids), ", incomplete" if incomplete else "")
    return True


async def _stored_under(cur: Any, turn: TurnSource) -> str:
    """The session the turn goes into: its own, or the name its thread was given while the
    reply was on its way (the rename moved the thread's rows already; the turn follows them
    instead of starting a ghost thread under the old name). The session's write lock, which
    a rename also takes, orders the two."""
    began = getattr(turn, "received_at", None)
    if began is None:
        return turn.session_id
    return (await threads_db.renamed_since(cur, turn.session_id, began, lock=True)
            or turn.session_id)


def _label_protocol(rows: list[NewMessage], turn: TurnSource, reply: CapturedReply,
                    reply_row: NewMessage | None) -> None:
    """Rows of a turn that came through another protocol than chat completions say which
    (``metadata.protocol``); its reply row keeps the provider's reasoning token count."""
    protocol = getattr(turn, "protocol", None)
    if not protocol:
        return
    for row in rows:
        row.metadata["protocol"] = protocol
    details = (reply.raw_usage or {}).get("completion_tokens_details")
    reasoning = details.get("reasoning_tokens") if isinstance(details, dict) else None
    if reply_row is not None and rows and isinstance(reasoning, int) and reasoning > 0:
        rows[-1].metadata["reasoning_tokens"] = reasoning


def _with_key(message: NewMessage, turn_key: str) -> NewMessage:
    return NewMessage(role=message.role, content=message.content, model=message.model,
                      metadata=message.metadata, created_at=message.created_at,
                      turn_id=turn_key)
