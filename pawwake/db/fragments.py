"""SQL for conversation recall: keyword terms, message vectors, context windows, seen marks."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple, TypedDict, cast

import numpy as np

from pawwake.db import vector_rows
from pawwake.db.pool import Cursor, TextRow, fetch_all, fetch_one, rows_as_dicts
from pawwake.db.vector_rows import (
    OF_PROVENANCE,
    VectorSource,
    VectorTable,
    content_sha,
    provenance_params,
    sha_sql,
    vector_literal,
)

__all__ = ["content_sha"]

RECALL_ROLES = ("user", "assistant")
HEAD_CHARS = 600  # of a candidate's text, when its words are looked at
_SHA = sha_sql("c")


def _searchable(alias: str) -> str:
    return (f"{alias}.deleted_at IS NULL AND {alias}.role IN ('user', 'assistant')"
            f" AND btrim({alias}.content) <> ''")


_SEARCHABLE = _searchable("c")
# An excluded session's message stays out unless it sits before the message ``keep_below``
# (the zone start) in the thread's (created_at, id) order; ids need not follow dates in
# imported rows. No such message (0): the whole session stays out.
_KEPT = ("(c.created_at, c.id) >= (SELECT z.created_at, z.id FROM conversations z"
         " WHERE z.id = %(keep_below)s)")
# Searchable messages need a vector (trashed ones keep theirs, so a restore needs none); an
# edit leaves the old vector behind with another digest until the job replaces it.
MESSAGE_VECTORS = VectorTable("conversation_embeddings", "message_id", "conversations",
                              stale=f"e.content_sha <> {sha_sql('s')}", scope=_searchable("s"))


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
        f"SELECT (SELECT count(*) FROM conversations c WHERE {_SEARCHABLE}"
        "  AND c.search_terms IS NOT NULL),"
        " (SELECT greatest(reltuples, 0)::bigint FROM pg_class"
        "  WHERE oid = 'conversations'::regclass)")
    searchable, estimated = await cur.fetchone()
    return int(searchable), int(estimated or 0)


async def searchable_totals(cur: Cursor) -> tuple[int, int, int]:
    """``searchable_count`` and, read in the same pass, the sessions holding an indexed
    searchable message (what a term's spread across sessions is measured against)."""
    await cur.execute(
        "SELECT count(*), count(DISTINCT c.session_id),"
        " (SELECT greatest(reltuples, 0)::bigint FROM pg_class"
        "  WHERE oid = 'conversations'::regclass)"
        f" FROM conversations c WHERE {_SEARCHABLE} AND c.search_terms IS NOT NULL")
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
        f"  AND {_SEARCHABLE}) AS n FROM unnest(%s::text[]) AS t", (list(terms),))
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
                           keep_below: int = 0) -> KeywordEvidence:
    """Messages sharing terms with the query, most shared terms first, then newest; in the
    same statement the searchable messages holding each ``counted`` term (on the GIN index,
    as ``term_counts``) and whether any message has no index terms yet: one round trip
    where a search made three.

    Every message containing one of ``terms`` is a candidate (at most ``gather_cap`` of
    them); the frequent ``windowed`` terms are only matched among the ``window`` newest
    searchable messages, so a common word never makes a search read a large part of the table.
    """
    gather = [t for t in terms if t not in windowed]
    columns = "c.id, c.session_id, c.role, c.created_at, c.search_terms"
    live = f"{_SEARCHABLE} AND NOT (c.session_id = ANY(%(exclude)s::text[]) AND {_KEPT})"
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
        "SELECT h.counts, h.bare, m.id, m.session_id, m.role, m.created_at, m.search_terms"
        " FROM (SELECT (SELECT coalesce(array_agg((SELECT count(*) FROM conversations c"
        f"     WHERE c.search_terms @> ARRAY[u.t] AND {_SEARCHABLE}) ORDER BY u.o), '{{}}')"
        "   FROM unnest(%(counted)s::text[]) WITH ORDINALITY AS u (t, o)) AS counts,"
        "  EXISTS (SELECT 1 FROM conversations WHERE search_terms IS NULL) AS bare) AS h"
        f" LEFT JOIN LATERAL ({matches}) AS m ON true"
        " ORDER BY m.shared DESC, m.created_at DESC, m.id DESC",
        {"terms": list(terms), "gather": gather, "windowed": list(windowed),
         "window": window, "cap": gather_cap, "exclude": list(exclude_sessions),
         "keep_below": keep_below, "limit": limit, "counted": list(counted)})
    first = rows[0]
    return KeywordEvidence(
        [{k: row[k] for k in ("id", "session_id", "role", "created_at", "search_terms")}
         for row in rows if row["id"] is not None],
        {t: int(n) for t, n in zip(counted, first["counts"], strict=True)},
        bool(first["bare"]))


# -- vectors ---------------------------------------------------------------------------------

async def messages_needing_vectors(cur: Cursor, provenance: VectorSource, after_id: int,
                                   limit: int) -> list[TextRow]:
    """Searchable messages without a current vector (none, or made from older text)."""
    return await vector_rows.rows_needing_vectors(cur, MESSAGE_VECTORS, provenance, after_id,
                                                  limit)


async def vector_coverage(cur: Cursor, provenance: VectorSource) -> tuple[int, int]:
    """(searchable messages with a current vector, searchable messages)."""
    return await vector_rows.coverage(cur, MESSAGE_VECTORS, provenance)


async def store_vectors(cur: Cursor, provenance: VectorSource,
                        rows: Sequence[tuple[int, str, np.ndarray]]) -> list[int]:
    """Upsert (message id, content sha, vector) rows; returns the ids stored (messages deleted
    or edited meanwhile are skipped)."""
    return await vector_rows.store_vectors(cur, MESSAGE_VECTORS, provenance, rows)


# A neighbour counts when its message is searchable, not excluded, and its vector was made
# from the message's current text; looked up by key, one neighbour at a time (``e`` is the
# neighbour: message_id, content_sha).
_LIVE_NEIGHBOUR = (
    "SELECT c.id, c.session_id, c.created_at FROM conversations c WHERE c.id = e.message_id"
    f" AND {_SEARCHABLE} AND e.content_sha = {_SHA}"
    f" AND NOT (c.session_id = ANY(%(exclude)s::text[]) AND {_KEPT}) OFFSET 0")


def nearest_sql(provenance: VectorSource) -> str:
    """The pgvector query of ``nearest_indexed``.

    The ``fetch`` nearest vectors come from the partial HNSW index alone (the CTE repeats the
    index predicate and orders by its expression); only then is each one's message looked up
    by key and filtered (``OFFSET 0`` keeps that lookup a per-row nested loop: as a plain join
    the planner hashes the whole table and digests every message's text). A single joined
    query is planned as a full hash join, because the planner believes the content digest
    check keeps almost nothing, so the LIMIT would never stop an index walk early.
    """
    dim = int(provenance.dim)
    return (
        "WITH near AS MATERIALIZED (SELECT e.message_id, e.content_sha,"
        f"   e.embedding::vector({dim}) <=> %(q)s::vector({dim}) AS distance"
        "   FROM conversation_embeddings e"
        "   WHERE e.dim = %(dim)s AND e.provider = %(provider)s AND e.model = %(model)s"
        f"   ORDER BY e.embedding::vector({dim}) <=> %(q)s::vector({dim}) LIMIT %(fetch)s)"
        " SELECT f.*, n.fetched FROM (SELECT count(*) AS fetched FROM near) AS n"
        " LEFT JOIN LATERAL (SELECT c.id, c.session_id, c.created_at, 1 - e.distance AS cosine"
        f"   FROM near e CROSS JOIN LATERAL ({_LIVE_NEIGHBOUR}) AS c"
        "   ORDER BY e.distance LIMIT %(k)s) AS f ON true")


def nearest_params(provenance: VectorSource, query: np.ndarray, k: int,
                   exclude_sessions: Sequence[str], fetch: int | None = None,
                   keep_below: int = 0) -> dict[str, Any]:
    fetch = fetch or 3 * k
    return {**provenance_params(provenance), "exclude": list(exclude_sessions),
            "keep_below": keep_below, "k": k, "fetch": fetch,
            "q": vector_literal(query), "ef": max(40, min(1000, fetch))}


_NEIGHBOUR_COLUMNS = ("id", "session_id", "created_at", "cosine")


async def nearest_indexed(cur: Cursor, provenance: VectorSource, query: np.ndarray, k: int,
                          exclude_sessions: Sequence[str], *, fetch: int, keep_below: int = 0
                          ) -> tuple[list[dict[str, Any]], bool]:
    """Of the ``fetch`` nearest vectors on the HNSW index, the ``k`` best live neighbours
    (best first) and whether every vector was read."""
    await cur.execute(
        "SET hnsw.ef_search = %(ef)s; SET hnsw.iterative_scan = relaxed_order; "
        + nearest_sql(provenance),
        nearest_params(provenance, query, k, exclude_sessions, fetch, keep_below))
    rows = rows_as_dicts(cur, await cur.fetchall())
    found = [{key: row[key] for key in _NEIGHBOUR_COLUMNS} for row in rows if row["id"] is not None]
    found.sort(key=lambda row: -row["cosine"])  # relaxed index order
    return found, rows[0]["fetched"] < fetch


async def live_neighbours(cur: Cursor, provenance: VectorSource,
                          near: Sequence[tuple[int, float]], k: int,
                          exclude_sessions: Sequence[str], *, keep_below: int = 0
                          ) -> list[dict[str, Any]]:
    """Of ``near`` (message id, cosine) found in memory, the ``k`` best live neighbours, best
    first: the same checks as the pgvector query, on the stored vector rows."""
    if not near:
        return []
    return await fetch_all(
        cur,
        "WITH near AS MATERIALIZED (SELECT e.message_id, e.content_sha, n.cosine"
        "   FROM unnest(%(ids)s::bigint[], %(cosines)s::float8[]) AS n (message_id, cosine)"
        "   JOIN conversation_embeddings e ON e.message_id = n.message_id"
        f"   AND {OF_PROVENANCE})"
        " SELECT c.id, c.session_id, c.created_at, e.cosine"
        f" FROM near e CROSS JOIN LATERAL ({_LIVE_NEIGHBOUR}) AS c"
        " ORDER BY e.cosine DESC, c.id DESC LIMIT %(k)s",
        {**provenance_params(provenance), "ids": [i for i, _ in near], "cosines": [c for _, c in near],
         "exclude": list(exclude_sessions), "keep_below": keep_below, "k": k})


async def background_vector(cur: Cursor, provenance: VectorSource, newest: int
                            ) -> tuple[np.ndarray | None, int]:
    """The mean of the provenance's ``newest`` message vectors (pgvector) and how many were
    averaged: the background conversation recall measures cosines from."""
    dim = int(provenance.dim)
    row = await fetch_one(
        cur,
        f"SELECT avg(e.embedding::vector({dim}))::text AS mean, count(*) AS n FROM ("
        "   SELECT e.embedding FROM conversation_embeddings e"
        f"   WHERE {OF_PROVENANCE} ORDER BY e.created_at DESC LIMIT %(newest)s) AS e",
        {**provenance_params(provenance), "newest": newest})
    if row is None or row["mean"] is None:
        return None, 0
    values = np.array(row["mean"].strip("[]").split(","), dtype=np.float32)
    return values, int(row["n"])


async def candidate_facts(cur: Cursor, message_ids: Sequence[int], *,
                          provenance: VectorSource | None = None,
                          vectors: Sequence[np.ndarray] = (), with_text: bool = False,
                          adjacent: Sequence[int] = (), adjacent_best: int = 0
                          ) -> list[dict[str, Any]]:
    """What ranking needs to know of candidate messages beyond their own scores, in one
    statement: with ``vectors`` (pgvector) the dot products of each one's current vector with
    each (``dots``, None without one); with ``with_text`` the head of its text (``head``);
    and the searchable messages just before and after it in its session (``prev_id``,
    ``next_id``, by key on the session's order index) for the ``adjacent`` ids, or for the
    ``adjacent_best`` with the highest first dot product less the second (the question seen
    from the background): looking both up for every candidate cost more than the rest."""
    if not message_ids:
        return []
    inner = ["c.id", "c.session_id", "c.role", "c.created_at"]
    params: dict[str, Any] = {"ids": list(message_ids), "adjacent": list(adjacent),
                              "best": adjacent_best}
    joined, order = "", "NULL::float8"
    if vectors:
        assert provenance is not None
        dim = int(provenance.dim)
        products = [f"-(e.embedding::vector({dim}) <#> %(v{i})s::vector({dim}))"
                    for i in range(len(vectors))]
        inner.append(f"CASE WHEN e.message_id IS NULL THEN NULL ELSE ARRAY[{', '.join(products)}]"
                     " END AS dots")
        # by key, one candidate at a time (``OFFSET 0``): as a plain join the planner hashes
        # the candidates and reads every vector of the table past them
        joined = (" LEFT JOIN LATERAL (SELECT e.message_id, e.embedding"
                  " FROM conversation_embeddings e WHERE e.message_id = c.id"
                  f" AND {OF_PROVENANCE} AND e.content_sha = {_SHA} OFFSET 0) AS e ON true")
        order = (f"CASE WHEN e.message_id IS NULL THEN NULL ELSE {' - '.join(products[:2])}"
                 " END")
        params.update(provenance_params(provenance))
        params.update({f"v{i}": vector_literal(v) for i, v in enumerate(vectors)})
    if with_text:
        inner.append("left(c.content, %(head)s) AS head")
        params["head"] = HEAD_CHARS
    inner.append(f"row_number() OVER (ORDER BY {order} DESC NULLS LAST, c.id) AS place")
    wanted = "(f.id = ANY(%(adjacent)s::bigint[]) OR f.place <= %(best)s)"
    return await fetch_all(
        cur,
        f"WITH f AS MATERIALIZED (SELECT {', '.join(inner)} FROM conversations c{joined}"
        "   WHERE c.id = ANY(%(ids)s::bigint[]))"
        f" SELECT f.*, CASE WHEN {wanted} THEN (SELECT p.id FROM conversations p"
        f"   WHERE p.session_id = f.session_id AND {_searchable('p')}"
        "   AND (p.created_at, p.id) < (f.created_at, f.id)"
        "   ORDER BY p.created_at DESC, p.id DESC LIMIT 1) END AS prev_id,"
        f" CASE WHEN {wanted} THEN (SELECT n.id FROM conversations n"
        f"   WHERE n.session_id = f.session_id AND {_searchable('n')}"
        "   AND (n.created_at, n.id) > (f.created_at, f.id)"
        "   ORDER BY n.created_at, n.id LIMIT 1) END AS next_id FROM f", params)


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
        f"   AND {_SEARCHABLE}),"
        " m AS (SELECT session_id, pos FROM s WHERE id = ANY(%(ids)s::bigint[])),"
        " w AS (SELECT DISTINCT s.id FROM s JOIN m ON m.session_id = s.session_id"
        "   AND s.pos BETWEEN m.pos - %(ctx)s AND m.pos + %(ctx)s)"
        " SELECT c.id, c.session_id, c.role, c.content, c.created_at FROM conversations c"
        " JOIN w ON w.id = c.id ORDER BY c.session_id, c.created_at, c.id",
        {"ids": list(matched_ids), "ctx": context}))
