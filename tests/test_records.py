"""The typed records hold what the SQL and the wire really carry: a row read through db/
(memories, search candidates, stored messages, fragment windows) has exactly its record's
keys, the API shows a memory with ``MemoryRow``'s keys and a recalled fragment with
``Fragment``'s, and every entry a chat turn stores in its injected record has the keys of the
record for its kind. A column added to a statement, or a key to an entry, without its record
fails here."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, get_args, get_type_hints

from pawwake.db import (
    consolidation,
    conversation_admin,
    conversations,
    extraction,
    fragments,
    memories,
    memory_rows,
    memory_search,
    partition_state,
    threads,
    turn_injections,
)
from pawwake.db.pool import cursor, fetch_all
from pawwake.recall.fragments import Fragment, FragmentMessage
from pawwake.services import services_of
from pawwake.text import messages
from tests.gateway_support import chat_body, settle
from tests.memory_support import create
from tests.test_conversation_recall import SESSIONS, store
from tests.test_conversation_recall import SETTINGS as RECALL
from tests.test_conversation_recall import search as recall_search
from tests.test_memory_injection import MEMORY_ON, add_memory


def keys(record: Any) -> set[str]:
    """Every key a TypedDict names, required or not."""
    return set(record.__required_keys__) | set(record.__optional_keys__)


async def test_memory_rows_have_their_records_keys(client: Any) -> None:
    made = await create(client, "用户的狗叫豆豆，是一只柯基", event_date="2025-03-01")
    assert set(made) - {"inserted"} == keys(memory_rows.MemoryRow)
    async with cursor(services_of(client.server.app).database.pool) as cur:
        row = await memories.get_memory(cur, made["id"])
        assert row is not None and set(row) == keys(memory_rows.MemoryRow)
        [listed] = await memories.list_memories(cur, active=True, layer=None, limit=5, offset=0)
        assert set(listed) == keys(memory_rows.MemoryRow)
        [dated] = await consolidation.rows_by_ids(cur, [made["id"]], 8)
        assert set(dated) == keys(consolidation.DatedMemoryRow)
        [stored] = await fetch_all(cur, "SELECT search_terms FROM memories WHERE id = %s",
                                   (made["id"],))
        [sharing] = await memories.rows_sharing_terms(cur, stored["search_terms"], 5)
        assert set(sharing) == keys(memory_rows.TermsRow)
        [counted] = await memories.layer_counts(cur)
        assert set(counted) == keys(memory_rows.LayerCount)
        [known] = await extraction.latest_active(cur, 5)
        assert set(known) == keys(extraction.KnownMemory)
        [fetched] = await memory_search.fetch_rows(cur, [made["id"]], [])
        assert set(fetched) == keys(memory_search.MemoryHit) | {"search_terms"}


async def test_search_candidates_have_their_records_keys(client: Any) -> None:
    made = await create(client, "用户的猫叫小橘")
    async with cursor(services_of(client.server.app).database.pool) as cur:
        [stored] = await fetch_all(cur, "SELECT search_terms FROM memories WHERE id = %s",
                                   (made["id"],))
        now = datetime.now(UTC)
        [row] = await memory_search.ranked_candidates(
            cur, collection=None, gather=stored["search_terms"][:1], windowed=[],
            estimates={}, window=100, gather_cap=100, exclude=[], limit=5,
            rank_weights=(1.0, 0.0, 0.0), now=now, today=now.date())
    assert set(row) == keys(memory_search.MemoryHit) | {"search_terms", "term_weights"}
    assert set(row) <= keys(memory_search.CandidateRow)


async def test_stored_injected_entries_have_their_records_keys(gateway: Any,
                                                               upstream: Any) -> None:
    client = await gateway(persona="你是小爪。", **MEMORY_ON, MAX_MEMORIES_INJECT=1)
    await add_memory(client, "用户的猫叫小橘")
    await add_memory(client, "小橘最爱吃三文鱼")
    response = await client.post("/v1/chat/completions", json=chat_body("小橘今天怎么样"))
    assert response.status == 200
    await settle(client)
    async with cursor(services_of(client.server.app).database.pool) as cur:
        [row] = await fetch_all(cur, "SELECT record FROM turn_injections")
    by_kind = {get_args(get_type_hints(record)["kind"])[0]: record
               for record in get_args(turn_injections.InjectedEntry)}
    stored = row["record"]
    assert {entry["kind"] for entry in stored} >= {"persona", "memory_search", "memory",
                                                   "near_miss"}
    for entry in stored:
        assert set(entry) == keys(by_kind[entry["kind"]]) - {"text"}, entry


async def test_recalled_fragments_have_their_records_keys(make_client: Any) -> None:
    client = await make_client(**RECALL)
    for day, (session, pairs) in enumerate(SESSIONS.items(), start=1):
        await store(client, session, pairs, day)
    found = await recall_search(client, q="京都清水寺", mode="keyword", context=1)
    [fragment] = found["fragments"]
    assert set(fragment) == keys(Fragment)
    assert {frozenset(message) for message in fragment["messages"]} == {
        frozenset(keys(FragmentMessage))}
    async with cursor(services_of(client.server.app).database.pool) as cur:
        [stored] = await fetch_all(cur, "SELECT min(id) AS id FROM conversations")
        [first, *_] = await fragments.context_windows(cur, [stored["id"]], 1)
    assert set(first) == keys(fragments.ContextMessage)


async def test_stored_messages_have_their_records_keys(make_client: Any) -> None:
    client = await make_client(**RECALL)
    await store(client, "trip", SESSIONS["trip"], 1)
    async with cursor(services_of(client.server.app).database.pool) as cur:
        tail = await conversations.session_tail(cur, "trip")
        thread = await partition_state.thread_messages(cur, "trip", None)
        history = await extraction.session_history(cur, "trip")
        skeleton = await extraction.session_skeleton(cur, "trip")
        managed = await conversation_admin.session_messages(cur, "trip", include_deleted=True)
        _, sessions = await conversation_admin.list_sessions(cur, trash=False, limit=5,
                                                             offset=0)
        exported = await conversation_admin.export_messages(cur)
        listed = await threads.list_threads(cur)
    assert tail and thread and history and skeleton and managed and sessions and exported
    assert {frozenset(row) for row in managed} == {frozenset(keys(conversation_admin.MessageRow))}
    assert {frozenset(row) for row in sessions} == {
        frozenset(keys(conversation_admin.SessionSummary))}
    assert {frozenset(row) for row in exported} == {
        frozenset(keys(conversation_admin.ExportedRow))}
    assert listed and {frozenset(row) for row in listed} == {frozenset(keys(threads.ThreadRow))}
    assert {frozenset(row) for row in tail} == {frozenset(keys(messages.TailMessage))}
    assert {frozenset(row) for row in thread + history} == {
        frozenset(keys(messages.StoredMessage))}
    assert {frozenset(row) for row in skeleton} == {frozenset(keys(messages.MessageSkeleton))}
