"""SQL for conversation recall: keyword terms, message vectors, context windows, seen marks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import aiopg
import numpy as np

from pawwake.db.memory_embeddings import array_literal, content_sha, vector_literal
from pawwake.db.pool import cursor, fetch_all, fetch_one

__all__ = ["content_sha"]

RECALL_ROLES = ("user", "assistant")
_SHA = "encode(sha256(convert_to(c.content, 'UTF8')), 'hex')"
_OF_PROVENANCE = "e.provider = %(provider)s AND e.model = %(model)s AND e.dim = %(dim)s"
_SEARCHABLE = ("c.deleted_at IS NULL AND c.role IN ('user', 'assistant')"
               " AND btrim(c.content) <> ''")


def _prov(provenance: Any) -> dict[str, Any]:
    return {"provider": provenance.provider, "model": provenance.model,
            "dim": int(provenance.dim)}


# -- keyword index ---------------------------------------------------------------------------

async def unindexed_messages(pool: aiopg.Pool, after_id: int, limit: int
                             ) -> list[dict[str, Any]]:
    return await fetch_all(
        pool, "SELECT id, content FROM conversations WHERE search_terms IS NULL AND id > %s"
              " ORDER BY id LIMIT %s", (after_id, limit))


async def index_counts(pool: aiopg.Pool) -> dict[str, int]:
    row = await fetch_one(
        pool, "SELECT count(*) FILTER (WHERE search_terms IS NOT NULL) AS indexed,"
              " count(*) AS total FROM conversations")
    assert row is not None
    return {"indexed": int(row["indexed"]), "total": int(row["total"])}


async def clear_terms(cur: Any, message_ids: Sequence[int]) -> None:
    """Mark messages for re-indexing (after an edit when the tokenizer is not loaded)."""
    await cur.execute("UPDATE conversations SET search_terms = NULL WHERE id = ANY(%s)",
                      (list(message_ids),))


async def term_frequencies(pool: aiopg.Pool, terms: Sequence[str]) -> tuple[int, dict[str, int]]:
    """(searchable messages, messages containing each term): the IDF statistics."""
    async with cursor(pool) as cur:
        await cur.execute(
            "SELECT t, (SELECT count(*) FROM conversations c WHERE c.search_terms @> ARRAY[t]"
            f"  AND {_SEARCHABLE}) FROM unnest(%s::text[]) AS t", (list(terms),))
        frequencies = {row[0]: int(row[1]) for row in await cur.fetchall()}
        await cur.execute(f"SELECT count(*) FROM conversations c WHERE {_SEARCHABLE}"
                          " AND c.search_terms IS NOT NULL")
        row = await cur.fetchone()
    return int(row[0]), frequencies


async def keyword_matches(pool: aiopg.Pool, terms: Sequence[str],
                          exclude_sessions: Sequence[str], limit: int
                          ) -> list[dict[str, Any]]:
    """Messages sharing terms with the query, most shared terms first, then newest."""
    return await fetch_all(
        pool,
        "SELECT c.id, c.session_id, c.created_at, c.search_terms"
        " FROM conversations c"
        f" WHERE c.search_terms && %(terms)s::text[] AND {_SEARCHABLE}"
        " AND NOT (c.session_id = ANY(%(exclude)s::text[]))"
        " ORDER BY cardinality(ARRAY(SELECT unnest(c.search_terms)"
        "   INTERSECT SELECT unnest(%(terms)s::text[]))) DESC, c.created_at DESC, c.id DESC"
        " LIMIT %(limit)s",
        {"terms": list(terms), "exclude": list(exclude_sessions), "limit": limit})


# -- vectors ---------------------------------------------------------------------------------

async def messages_needing_vectors(pool: aiopg.Pool, provenance: Any, after_id: int,
                                   limit: int) -> list[dict[str, Any]]:
    """Searchable messages without a current vector (none, or made from older text)."""
    return await fetch_all(
        pool,
        "SELECT c.id, c.content FROM conversations c"
        f" LEFT JOIN conversation_embeddings e ON e.message_id = c.id AND {_OF_PROVENANCE}"
        f" WHERE c.id > %(after)s AND {_SEARCHABLE}"
        f" AND (e.message_id IS NULL OR e.content_sha <> {_SHA})"
        " ORDER BY c.id LIMIT %(limit)s",
        {**_prov(provenance), "after": after_id, "limit": limit})


async def vector_coverage(pool: aiopg.Pool, provenance: Any) -> tuple[int, int]:
    """(searchable messages with a current vector, searchable messages)."""
    row = await fetch_one(
        pool,
        f"SELECT count(*) FILTER (WHERE e.message_id IS NOT NULL AND e.content_sha = {_SHA})"
        " AS done, count(*) AS total FROM conversations c"
        f" LEFT JOIN conversation_embeddings e ON e.message_id = c.id AND {_OF_PROVENANCE}"
        f" WHERE {_SEARCHABLE}", _prov(provenance))
    assert row is not None
    return int(row["done"]), int(row["total"])


async def store_vectors(pool: aiopg.Pool, provenance: Any,
                        rows: Sequence[tuple[int, str, np.ndarray]]) -> int:
    """Upsert (message id, content sha, vector) rows; messages deleted meanwhile are skipped."""
    if not rows:
        return 0
    values = ", ".join(["(%s::bigint, %s, %s::real[])"] * len(rows))
    params: list[Any] = []
    for message_id, sha, vector in rows:
        params += [message_id, sha, array_literal(vector)]
    async with cursor(pool) as cur:
        await cur.execute(
            "INSERT INTO conversation_embeddings (message_id, provider, model, dim,"
            " content_sha, embedding) SELECT v.id, %s, %s, %s, v.sha, v.vec FROM (VALUES "
            + values + ") AS v(id, sha, vec) JOIN conversations c ON c.id = v.id"
            " ON CONFLICT (message_id) DO UPDATE SET provider = EXCLUDED.provider,"
            " model = EXCLUDED.model, dim = EXCLUDED.dim, content_sha = EXCLUDED.content_sha,"
            " embedding = EXCLUDED.embedding, created_at = now()",
            [provenance.provider, provenance.model, int(provenance.dim), *params])
        return cur.rowcount


async def nearest_messages(pool: aiopg.Pool, provenance: Any, query: np.ndarray, k: int,
                           exclude_sessions: Sequence[str], *, pgvector: bool
                           ) -> list[dict[str, Any]]:
    """The ``k`` searchable messages closest to ``query`` with their raw cosine."""
    params = {**_prov(provenance), "exclude": list(exclude_sessions), "k": k}
    where = (f"{_OF_PROVENANCE} AND {_SEARCHABLE} AND e.content_sha = {_SHA}"
             " AND NOT (c.session_id = ANY(%(exclude)s::text[]))")
    if pgvector:
        dim = int(provenance.dim)
        return await fetch_all(
            pool,
            f"SELECT c.id, c.session_id, c.created_at, 1 - (e.embedding::vector({dim})"
            f" <=> %(q)s::vector({dim})) AS cosine FROM conversation_embeddings e"
            f" JOIN conversations c ON c.id = e.message_id WHERE {where}"
            f" ORDER BY e.embedding::vector({dim}) <=> %(q)s::vector({dim}) LIMIT %(k)s",
            {**params, "q": vector_literal(query)})
    rows = await fetch_all(
        pool,
        "SELECT c.id, c.session_id, c.created_at, e.embedding FROM conversation_embeddings e"
        f" JOIN conversations c ON c.id = e.message_id WHERE {where}"
        " ORDER BY c.id DESC LIMIT 50000", params)
    if not rows:
        return []
    matrix = np.asarray([row.pop("embedding") for row in rows], dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1)
    norms[norms == 0] = 1.0
    scores = (matrix @ np.asarray(query, dtype=np.float32)) / norms
    order = np.argsort(-scores)[:k]
    return [{**rows[i], "cosine": float(scores[i])} for i in order]


# -- context windows -------------------------------------------------------------------------

async def session_dialogue(pool: aiopg.Pool, session_ids: Sequence[str]
                           ) -> list[dict[str, Any]]:
    """Live user/assistant messages of the sessions, in order (context windows are cut from
    these in Python)."""
    return await fetch_all(
        pool,
        "SELECT c.id, c.session_id, c.role, c.content, c.created_at FROM conversations c"
        f" WHERE c.session_id = ANY(%s::text[]) AND {_SEARCHABLE}"
        " ORDER BY c.session_id, c.created_at, c.id", (list(session_ids),))


# -- seen marks of injected fragments ---------------------------------------------------------

async def mark_seen(cur: Any, session_id: str, fragment_ids: Sequence[str]) -> None:
    if not fragment_ids:
        return
    await cur.execute(
        "INSERT INTO conversation_fragment_seen (session_id, fragment_id)"
        " SELECT %s, unnest(%s::text[])"
        " ON CONFLICT (session_id, fragment_id) DO UPDATE SET seen_at = now()",
        (session_id, list(fragment_ids)))


async def seen_within(pool: aiopg.Pool, session_id: str, ttl_hours: float) -> set[str]:
    rows = await fetch_all(
        pool, "SELECT fragment_id FROM conversation_fragment_seen WHERE session_id = %s"
              " AND seen_at > now() - make_interval(secs => %s)",
        (session_id, ttl_hours * 3600.0))
    return {row["fragment_id"] for row in rows}


async def forget_expired(pool: aiopg.Pool, ttl_hours: float) -> int:
    async with cursor(pool) as cur:
        await cur.execute("DELETE FROM conversation_fragment_seen"
                          " WHERE seen_at <= now() - make_interval(secs => %s)",
                          (ttl_hours * 3600.0,))
        return cur.rowcount


async def context_windows(pool: aiopg.Pool, matched_ids: Sequence[int], context: int
                          ) -> list[dict[str, Any]]:
    """The matched messages and ``context`` searchable neighbours on each side, per session,
    in order; positions are computed in SQL so only the window's text is transferred."""
    if not matched_ids:
        return []
    return await fetch_all(
        pool,
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
        {"ids": list(matched_ids), "ctx": context})
