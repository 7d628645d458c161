"""SQL for conversation recall: keyword terms, context windows, seen marks (message vectors:
``db/message_vectors.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple, TypedDict, cast

from pawwake.db.array_literals import TextArray
from pawwake.db.pool import Cursor, TextRow, fetch_all, fetch_one
from pawwake.db.vector_rows import content_sha, sha_sql

__all__ = ["content_sha"]

RECALL_ROLES = ("user", "assistant")
SHA = sha_sql("c")


def searchable(alias: str) -> str:
    """The SQL condition of a message recall searches (kept, spoken, not blank)."""
    return (f"{alias}.deleted_at IS NULL AND {alias}.role IN ('user', 'assistant')"
            f" AND btrim({alias}.content) <> ''")


SEARCHABLE = searchable("c")
# An excluded session's message stays out unless it sits before the message ``keep_below``
# (the zone start) in the thread's (created_at, id) order; ids need not follow dates in
# imported rows. No such message (0): the whole session stays out.
KEPT = ("(c.created_at, c.id) >= (SELECT z.created_at, z.id FROM conversations z"
        " WHERE z.id = %(keep_below)s)")


# -- keyword index ---------------------------------------------------------------------------

async def unindexed_messages(cur: Cursor, after_id: int, limit: int
                             ) -> list[TextRow]:
    return cast(list[TextRow], await fetch_all(
        cur, "SELECT id, content FROM conversations WHERE search_terms IS NULL AND id > %s"
             " ORDER BY id LIMIT %s", (after_id, limit)))


async def index_counts(cur: Cursor) -> dict[str, int]:
    row = await fetch_one(
        cur, "SELECT count(*) FILTER (WHERE search_terms IS NOT NULL) AS indexed,"
             " count(*) AS total FROM conversations")
    assert row is not None
    return {"indexed": int(row["indexed"]), "total": int(row["total"])}


async def clear_terms(cur: Cursor, message_ids: Sequence[int]) -> None:
    """Mark messages for re-indexing (after an edit when the tokenizer is not loaded)."""
    await cur.execute("UPDATE conversations SET search_terms = NULL WHERE id = ANY(%s)",
                      (list(message_ids),))


async def searchable_count(cur: Cursor) -> tuple[int, int]:
    """(indexed searchable messages: N of the IDF formula, all rows as last estimated)."""
    await cur.execute(
        f"SELECT (SELECT count(*) FROM conversations c WHERE {SEARCHABLE}"
        "  AND c.search_terms IS NOT NULL),"
        " (SELECT greatest(reltuples, 0)::bigint FROM pg_class"
        "  WHERE oid = 'conversations'::regclass)")
    searchable, estimated = await cur.fetchone()
    return int(searchable), int(estimated or 0)


# ``searchable_totals`` as one array column of another statement
_TOTALS = ("(SELECT ARRAY[count(*), count(DISTINCT c.session_id),"
           " (SELECT greatest(reltuples, 0)::bigint FROM pg_class"
           "  WHERE oid = 'conversations'::regclass)]"
           f" FROM conversations c WHERE {SEARCHABLE} AND c.search_terms IS NOT NULL)")


async def searchable_totals(cur: Cursor) -> tuple[int, int, int]:
    """``searchable_count`` and, read in the same pass, the sessions holding an indexed
    searchable message (what a term's spread across sessions is measured against)."""
    await cur.execute(
        "SELECT count(*), count(DISTINCT c.session_id),"
        " (SELECT greatest(reltuples, 0)::bigint FROM pg_class"
        "  WHERE oid = 'conversations'::regclass)"
        f" FROM conversations c WHERE {SEARCHABLE} AND c.search_terms IS NOT NULL")
    searchable, sessions, estimated = await cur.fetchone()
    return int(searchable), int(sessions), int(estimated or 0)


async def term_counts(cur: Cursor, terms: Sequence[str]) -> dict[str, int]:
    """Searchable messages containing each term, counted on the GIN index (meant for terms
    the statistics do not list as frequent)."""
    if not terms:
        return {}
    rows = await fetch_all(
        cur,
        "SELECT t, (SELECT count(*) FROM conversations c WHERE c.search_terms @> ARRAY[t]"
        f"  AND {SEARCHABLE}) AS n FROM unnest(%s::text[]) AS t", (list(terms),))
    return {row["t"]: int(row["n"]) for row in rows}


async def term_frequencies(cur: Cursor, terms: Sequence[str]) -> tuple[int, dict[str, int]]:
    """(searchable messages, messages containing each term), counted exactly: the IDF
    statistics of small collections, for comparison (``search.term_stats`` caches and
    estimates at scale)."""
    count, _ = await searchable_count(cur)
    return count, await term_counts(cur, terms)


class KeywordEvidence(NamedTuple):
    """What recall's keyword side reads in one statement (``keyword_evidence``)."""

    rows: list[dict[str, Any]]  # the messages sharing terms with the query, best first
    counts: dict[str, int]  # searchable messages holding each of the terms asked to count
    bare: bool  # some message waits for its index terms (a writer left it without)
    totals: tuple[int, int, int] | None = None  # ``searchable_totals``, when asked for


async def keyword_matches(cur: Cursor, terms: Sequence[str],
                          exclude_sessions: Sequence[str], limit: int, *,
                          windowed: Sequence[str] = (), window: int = 1000,
                          gather_cap: int | None = None, keep_below: int = 0
                          ) -> list[dict[str, Any]]:
    """Messages sharing terms with the query (``keyword_evidence``'s rows)."""
    found = await keyword_evidence(cur, terms, exclude_sessions, limit, windowed=windowed,
                                   window=window, gather_cap=gather_cap,
                                   keep_below=keep_below)
    return found.rows


async def keyword_evidence(cur: Cursor, terms: Sequence[str],
                           exclude_sessions: Sequence[str], limit: int, *,
                           counted: Sequence[str] = (), windowed: Sequence[str] = (),
                           window: int = 1000, gather_cap: int | None = None,
                           keep_below: int = 0, totals: bool = False) -> KeywordEvidence:
    """Messages sharing terms with the query, most shared terms first, then newest; in the
    same statement the searchable messages holding each ``counted`` term (on the GIN index,
    as ``term_counts``), whether any message has no index terms yet and, with ``totals``,
    ``searchable_totals`` (what a small collection's plan needs): one round trip where a
    search made four.

    Every message containing one of ``terms`` is a candidate (at most ``gather_cap`` of
    them); the frequent ``windowed`` terms are only matched among the ``window`` newest
    searchable messages, so a common word never makes a search read a large part of the table.
    """
    gather = [t for t in terms if t not in windowed]
    columns = "c.id, c.session_id, c.role, c.created_at, c.search_terms"
    live = f"{SEARCHABLE} AND NOT (c.session_id = ANY(%(exclude)s::text[]) AND {KEPT})"
    sources = []
    if gather:
        sources.append(f"(SELECT {columns} FROM conversations c"
                       f" WHERE c.search_terms && %(gather)s::text[] AND {live}"
                       " LIMIT %(cap)s)")
    if windowed:  # rows already gathered are left out, so no de-duplication is needed
        sources.append(f"(SELECT * FROM (SELECT {columns} FROM conversations c WHERE {live}"
                       "   ORDER BY c.created_at DESC LIMIT %(window)s) AS recent"
                       " WHERE recent.search_terms && %(windowed)s::text[]"
                       " AND NOT (recent.search_terms && %(gather)s::text[]))")
    matches = ("SELECT NULL::bigint AS id, NULL::text AS session_id, NULL::text AS role,"
               " NULL::timestamptz AS created_at, NULL::text[] AS search_terms,"
               " 0 AS shared WHERE false")
    if sources:
        matches = ("SELECT m.*, cardinality(ARRAY(SELECT unnest(m.search_terms)"
                   "   INTERSECT SELECT unnest(%(terms)s::text[]))) AS shared"
                   f" FROM ({' UNION ALL '.join(sources)}) AS m"
                   " ORDER BY shared DESC, m.created_at DESC, m.id DESC LIMIT %(limit)s")
    # one row at least (the counts and the flag), the matches joined to it
    rows = await fetch_all(
        cur,
        "SELECT h.counts, h.bare, h.totals, m.id, m.session_id, m.role, m.created_at,"
        " m.search_terms"
        " FROM (SELECT (SELECT coalesce(array_agg((SELECT count(*) FROM conversations c"
        f"     WHERE c.search_terms @> ARRAY[u.t] AND {SEARCHABLE}) ORDER BY u.o), '{{}}')"
        "   FROM unnest(%(counted)s::text[]) WITH ORDINALITY AS u (t, o)) AS counts,"
        "  EXISTS (SELECT 1 FROM conversations WHERE search_terms IS NULL) AS bare,"
        f" {_TOTALS if totals else 'NULL::bigint[]'} AS totals) AS h"
        f" LEFT JOIN LATERAL ({matches}) AS m ON true"
        " ORDER BY m.shared DESC, m.created_at DESC, m.id DESC",
        {"terms": TextArray(terms), "gather": TextArray(gather), "windowed": TextArray(windowed),
         "window": window, "cap": gather_cap, "exclude": TextArray(exclude_sessions),
         "keep_below": keep_below, "limit": limit, "counted": TextArray(counted)})
    first = rows[0]
    return KeywordEvidence(
        [{k: row[k] for k in ("id", "session_id", "role", "created_at", "search_terms")}
         for row in rows if row["id"] is not None],
        {t: int(n) for t, n in zip(counted, first["counts"], strict=True)},
        bool(first["bare"]),
        None if first["totals"] is None else (int(first["totals"][0]), int(first["totals"][1]),
                                              int(first["totals"][2])))


# -- context windows -------------------------------------------------------------------------

# -- seen marks of injected fragments ---------------------------------------------------------

async def mark_seen(cur: Cursor, session_id: str, fragment_ids: Sequence[str]) -> None:
    if not fragment_ids:
        return
    await cur.execute(
        "INSERT INTO conversation_fragment_seen (session_id, fragment_id)"
        " SELECT %s, unnest(%s::text[])"
        " ON CONFLICT (session_id, fragment_id) DO UPDATE SET seen_at = now()",
        (session_id, list(fragment_ids)))


async def seen_within(cur: Cursor, session_id: str, ttl_hours: float) -> set[str]:
    rows = await fetch_all(
        cur, "SELECT fragment_id FROM conversation_fragment_seen WHERE session_id = %s"
             " AND seen_at > now() - make_interval(secs => %s)",
        (session_id, ttl_hours * 3600.0))
    return {row["fragment_id"] for row in rows}


class ContextMessage(TypedDict):
    """A message of a fragment's window (``context_windows``)."""

    id: int
    session_id: str
    role: str
    content: str
    created_at: datetime


async def context_windows(cur: Cursor, matched_ids: Sequence[int], context: int
                          ) -> list[ContextMessage]:
    """The matched messages and ``context`` searchable neighbours on each side, per session,
    in order; positions are computed in SQL so only the window's text is transferred."""
    if not matched_ids:
        return []
    return cast(list[ContextMessage], await fetch_all(
        cur,
        "WITH sessions AS (SELECT DISTINCT session_id FROM conversations"
        "   WHERE id = ANY(%(ids)s::bigint[])),"
        " s AS (SELECT c.id, c.session_id, c.created_at, row_number() OVER ("
        "   PARTITION BY c.session_id ORDER BY c.created_at, c.id) AS pos"
        f"   FROM conversations c WHERE c.session_id IN (SELECT session_id FROM sessions)"
        f"   AND {SEARCHABLE}),"
        " m AS (SELECT session_id, pos FROM s WHERE id = ANY(%(ids)s::bigint[])),"
        " w AS (SELECT DISTINCT s.id FROM s JOIN m ON m.session_id = s.session_id"
        "   AND s.pos BETWEEN m.pos - %(ctx)s AND m.pos + %(ctx)s)"
        " SELECT c.id, c.session_id, c.role, c.content, c.created_at FROM conversations c"
        " JOIN w ON w.id = c.id ORDER BY c.session_id, c.created_at, c.id",
        {"ids": list(matched_ids), "ctx": context}))
