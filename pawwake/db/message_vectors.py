"""SQL for conversation message vectors: which messages need one, storing them, the nearest
live neighbours (pgvector or the numpy index's rows checked), the background recall measures
from, and what ranking reads of its candidates (dot products, text head, neighbours in the
session)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from pawwake.db import vector_rows
from pawwake.db.array_literals import IdArray
from pawwake.db.fragments import KEPT, SEARCHABLE, SHA, searchable
from pawwake.db.pool import Cursor, TextRow, fetch_all, fetch_one, rows_as_dicts
from pawwake.db.vector_rows import (
    OF_PROVENANCE,
    VectorSource,
    VectorTable,
    provenance_params,
    sha_sql,
    vector_literal,
)

HEAD_CHARS = 600  # of a candidate's text, when its words are looked at

# Searchable messages need a vector (trashed ones keep theirs, so a restore needs none); an
# edit leaves the old vector behind with another digest until the job replaces it.
MESSAGE_VECTORS = VectorTable("conversation_embeddings", "message_id", "conversations",
                              stale=f"e.content_sha <> {sha_sql('s')}", scope=searchable("s"))


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
    f" AND {SEARCHABLE} AND e.content_sha = {SHA}"
    f" AND NOT (c.session_id = ANY(%(exclude)s::text[]) AND {KEPT}) OFFSET 0")


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
    params: dict[str, Any] = {"ids": list(message_ids), "adjacent": list(adjacent),
                              "best": adjacent_best}
    columns, joined, order = _fact_columns(params, provenance, vectors, with_text)
    columns.append(f"row_number() OVER (ORDER BY {order} DESC NULLS LAST, c.id) AS place")
    return await fetch_all(
        cur,
        f"WITH f AS MATERIALIZED (SELECT {', '.join(columns)} FROM conversations c{joined}"
        "   WHERE c.id = ANY(%(ids)s::bigint[]))"
        f" {_with_neighbours('(f.id = ANY(%(adjacent)s::bigint[]) OR f.place <= %(best)s)')}",
        params)


def _fact_columns(params: dict[str, Any], provenance: VectorSource | None,
                  vectors: Sequence[np.ndarray], with_text: bool
                  ) -> tuple[list[str], str, str]:
    """The columns of a candidate's facts (``c`` is its message), the join that reads its
    vector and the order of its closeness to the question (``candidate_facts``); the
    parameters they use go into ``params``."""
    columns = ["c.id", "c.session_id", "c.role", "c.created_at"]
    joined, order = "", "NULL::float8"
    if vectors:
        assert provenance is not None
        dim = int(provenance.dim)
        products = [f"-(e.embedding::vector({dim}) <#> %(v{i})s::vector({dim}))"
                    for i in range(len(vectors))]
        columns.append(f"CASE WHEN e.message_id IS NULL THEN NULL ELSE ARRAY[{', '.join(products)}]"
                       " END AS dots")
        # by key, one candidate at a time (``OFFSET 0``): as a plain join the planner hashes
        # the candidates and reads every vector of the table past them
        joined = (" LEFT JOIN LATERAL (SELECT e.message_id, e.embedding"
                  " FROM conversation_embeddings e WHERE e.message_id = c.id"
                  f" AND {OF_PROVENANCE} AND e.content_sha = {SHA} OFFSET 0) AS e ON true")
        order = (f"CASE WHEN e.message_id IS NULL THEN NULL ELSE {' - '.join(products[:2])}"
                 " END")
        params.update(provenance_params(provenance))
        params.update({f"v{i}": vector_literal(v) for i, v in enumerate(vectors)})
    if with_text:
        columns.append("left(c.content, %(head)s) AS head")
        params["head"] = HEAD_CHARS
    return columns, joined, order


def _with_neighbours(wanted: str) -> str:
    """The facts ``f`` with, for the rows ``wanted`` selects, the searchable messages before
    and after each in its session."""
    return (
        f"SELECT f.*, CASE WHEN {wanted} THEN (SELECT p.id FROM conversations p"
        f"   WHERE p.session_id = f.session_id AND {searchable('p')}"
        "   AND (p.created_at, p.id) < (f.created_at, f.id)"
        "   ORDER BY p.created_at DESC, p.id DESC LIMIT 1) END AS prev_id,"
        f" CASE WHEN {wanted} THEN (SELECT n.id FROM conversations n"
        f"   WHERE n.session_id = f.session_id AND {searchable('n')}"
        "   AND (n.created_at, n.id) > (f.created_at, f.id)"
        "   ORDER BY n.created_at, n.id LIMIT 1) END AS next_id FROM f")


def floats_literal(values: Iterable[float]) -> str:
    """Floats as one array literal (``'{0.5,0.25}'``, cast in the SQL), every digit kept
    (``repr``): one constant for the planner, as ``IdArray`` is for ids, where a list is sent
    as ``ARRAY[...]``, one constant per element (hundreds of them took milliseconds to plan)."""
    return "{" + ",".join(repr(float(v)) for v in values) + "}"


async def nearest_with_facts(cur: Cursor, provenance: VectorSource, k: int,
                             exclude_sessions: Sequence[str], *, keep_below: int = 0,
                             query: np.ndarray | None = None, fetch: int = 0,
                             near: Sequence[tuple[int, float]] = (),
                             seen: Mapping[int, float] | None = None,
                             also: Sequence[int] = (), also_limit: int = 0,
                             vectors: Sequence[np.ndarray] = (), with_text: bool = False,
                             adjacent_best: int = 0) -> tuple[list[dict[str, Any]], int]:
    """``nearest_indexed`` (pgvector, ``query``: the ``fetch`` nearest on the HNSW index) or
    ``live_neighbours`` (numpy, ``near`` as the index found them) and ``candidate_facts``
    of those ``k`` best live neighbours and of the first ``also_limit`` of ``also`` that are
    not among them, in one statement: the rows of ``candidate_facts`` with ``near`` (the
    cosine of a neighbour, None for the others), and how many neighbours were read.

    On pgvector ``vectors`` give the dot products and the order of closeness (as
    ``candidate_facts``); on numpy ``seen`` gives each candidate's closeness (computed from
    the index) and only those with one are looked up for neighbours."""
    params: dict[str, Any] = {
        **provenance_params(provenance), "exclude": list(exclude_sessions),
        "keep_below": keep_below, "k": k, "also": IdArray(also), "also_limit": also_limit,
        "best": adjacent_best}
    if query is not None:
        dim = int(provenance.dim)
        distance = f"e.embedding::vector({dim}) <=> %(q)s::vector({dim})"
        params.update({"q": vector_literal(query), "fetch": fetch,
                       "ef": max(40, min(1000, fetch))})
        nearest = (f"SELECT e.message_id, e.content_sha, {distance} AS distance"
                   f" FROM conversation_embeddings e WHERE {OF_PROVENANCE}"
                   f" ORDER BY {distance} LIMIT %(fetch)s")
        live = ("SELECT c.id, c.session_id, c.created_at, 1 - e.distance AS cosine"
                f" FROM near e CROSS JOIN LATERAL ({_LIVE_NEIGHBOUR}) AS c"
                " ORDER BY e.distance, c.id DESC LIMIT %(k)s")
        prefix = "SET hnsw.ef_search = %(ef)s; SET hnsw.iterative_scan = relaxed_order; "
    else:
        params.update({"ids": IdArray(i for i, _ in near),
                       "cosines": floats_literal(c for _, c in near)})
        # in the index's order, so the live check below stops after ``k`` (and ties)
        nearest = ("SELECT e.message_id, e.content_sha, n.cosine FROM unnest(%(ids)s::bigint[],"
                   " %(cosines)s::float8[]) AS n (message_id, cosine)"
                   " JOIN conversation_embeddings e ON e.message_id = n.message_id"
                   f" AND {OF_PROVENANCE} ORDER BY n.cosine DESC")
        live = ("SELECT c.id, c.session_id, c.created_at, e.cosine"
                f" FROM near e CROSS JOIN LATERAL ({_LIVE_NEIGHBOUR}) AS c"
                " ORDER BY e.cosine DESC, c.id DESC LIMIT %(k)s")
        prefix = ""
    columns, joined, order = _fact_columns(params, provenance, vectors, with_text)
    columns.append("p.near")
    if seen is None:
        columns.append(f"row_number() OVER (ORDER BY {order} DESC NULLS LAST, c.id) AS place")
        wanted = "f.place <= %(best)s"
    else:
        params.update({"seen_ids": IdArray(seen), "seen": floats_literal(seen.values())})
        joined += (" LEFT JOIN unnest(%(seen_ids)s::bigint[], %(seen)s::float8[])"
                   " AS s (id, seen) ON s.id = c.id")
        columns.append("s.seen IS NOT NULL AS has_seen")
        columns.append("row_number() OVER (ORDER BY s.seen DESC NULLS LAST, p.ord) AS place")
        wanted = "(f.has_seen AND f.place <= %(best)s)"
    rows = await fetch_all(
        cur,
        prefix + f"WITH near AS MATERIALIZED ({nearest}),"
        f" live AS MATERIALIZED ({live}),"
        " picked AS MATERIALIZED (SELECT l.id, row_number() OVER (ORDER BY l.cosine DESC,"
        "   l.id DESC) AS ord, l.cosine AS near FROM live l"
        "  UNION ALL SELECT a.id, (SELECT count(*) FROM live) + a.o, NULL::float8"
        "   FROM (SELECT u.id, u.o FROM unnest(%(also)s::bigint[]) WITH ORDINALITY AS u (id, o)"
        "   WHERE u.id NOT IN (SELECT id FROM live) ORDER BY u.o LIMIT %(also_limit)s) AS a),"
        f" f AS MATERIALIZED (SELECT {', '.join(columns)} FROM picked p"
        f"   JOIN conversations c ON c.id = p.id{joined})"
        " SELECT n.fetched, x.* FROM (SELECT count(*) AS fetched FROM near) AS n"
        f" LEFT JOIN LATERAL ({_with_neighbours(wanted)}) AS x ON true",
        params)
    fetched = int(rows[0]["fetched"])
    return [row for row in rows if row["id"] is not None], fetched
