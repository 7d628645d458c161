"""SQL for memory search: collection statistics and ranked keyword candidates.

Keyword matching uses ``search_terms && terms`` on the GIN index, never ILIKE scans. A row's
hit weight is the sum of the IDF weights ``ln((N+1)/(df+1)) + 1`` of the query terms it
contains; document frequencies of gathered terms are counted in the same statement (the
formula is ``pawwake.text.tokens.idf_weight``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any, TypedDict, cast

import numpy as np

from pawwake.db import prepared
from pawwake.db.array_literals import IdArray, TextArray
from pawwake.db.memory_embeddings import knn_params, sent_vector_sql, vector_literal
from pawwake.db.pool import Cursor, fetch_all, rows_as_dicts
from pawwake.db.vector_rows import OF_PROVENANCE, VectorSource, provenance_params

_MEMORY_NAMES = ("id", "content", "importance", "layer", "title", "event_date", "created_at",
                 "last_accessed", "remind_at", "reminder_delivered_at")
MEMORY_COLUMNS = ", ".join(f"m.{name}" for name in _MEMORY_NAMES)


class MemoryHit(TypedDict):
    """A memory as search hands it on (``_MEMORY_NAMES``): to injection, the try-it page, the
    dashboard's search, the API and MCP."""

    id: int
    content: str
    importance: int
    layer: int
    title: str | None
    event_date: date | None
    created_at: datetime
    last_accessed: datetime | None
    remind_at: datetime | None
    reminder_delivered_at: datetime | None


class CandidateRow(MemoryHit, total=False):
    """A search candidate as fetched: a ``MemoryHit`` with what scoring consumes (each key is
    taken off the row once read, so the hit goes on without it)."""

    search_terms: list[str]
    vector: str | None  # ``sent_vector_sql`` of the stored vector (pgvector reads only)
    term_weights: dict[str, float] | None  # the query's terms -> IDF weight, on one row
_RECENCY = ("1.0 / (1.0 + CASE WHEN g.event_date IS NOT NULL"
            " THEN abs(%(today)s::date - g.event_date)::float8"
            " ELSE greatest(0.0, extract(epoch FROM %(now)s::timestamptz - g.created_at)::float8"
            " / 86400.0) END)")


async def collection_size(cur: Cursor) -> tuple[int, int]:
    """(active memories, all rows as the planner last estimated them)."""
    await cur.execute(
        "SELECT (SELECT count(*) FROM memories WHERE is_active),"
        " (SELECT greatest(reltuples, 0)::bigint FROM pg_class"
        "  WHERE oid = 'memories'::regclass)")
    active, estimated = await cur.fetchone()
    return int(active), int(estimated or 0)


async def frequent_terms(cur: Cursor, table: str = "memories") -> dict[str, float]:
    """The planner's most common ``search_terms`` of ``table`` with the share of rows
    containing each."""
    await cur.execute(
        "SELECT most_common_elems::text::text[], most_common_elem_freqs FROM pg_stats"
        " WHERE schemaname = current_schema() AND tablename = %s"
        " AND attname = 'search_terms'", (table,))
    row = await cur.fetchone()
    if not row or not row[0]:
        return {}
    return dict(zip(row[0], row[1], strict=False))  # the last three shares are summaries


async def ranked_candidates(cur: Cursor, *, collection: int | None,
                            gather: Sequence[str],
                            windowed: Sequence[str], estimates: Mapping[str, int],
                            window: int, gather_cap: int | None, exclude: Sequence[int],
                            limit: int,
                            rank_weights: tuple[float, float, float], now: datetime,
                            today: date, vectors_of: VectorSource | None = None,
                            concept_of: Mapping[str, str] | None = None
                            ) -> list[CandidateRow]:
    """The ``limit`` best active, not excluded keyword candidates by
    ``wk*share + wi*importance/10 + wr*recency``, with their ``search_terms`` that are query
    terms (``gather`` and ``windowed``: all that scoring reads; a row's whole list was most of
    what the statement sent) and the query's ``term_weights`` (term -> IDF weight) on one of
    them (``query_term_weights``). ``collection=None``: N is the active memories counted by
    this statement (small collections, no extra round-trip).
    With ``vectors_of`` (pgvector), each row also brings its stored vector of that provenance
    in ``vector`` (``memory_embeddings.sent_vector_sql``; NULL when it has none): read before
    the query's vector exists, so the rows' cosines cost nothing after it. ``concept_of``:
    the query keyword each term stands for (default: itself). A row's hit counts each
    keyword once, with the keyword's weight, whether it holds the keyword or one of its
    other-language terms, and the share's whole is the keywords' weights: other-language
    terms find rows without diluting the share, and a row holding several translations of
    one keyword does not outrank one holding two different keywords.
    """
    terms = [*gather, *windowed]
    params: dict[str, Any] = {
        "gather": TextArray(gather), "windowed": TextArray(windowed), "window": window,
        "gather_cap": gather_cap,
        "terms": TextArray(terms), "estimates": [estimates.get(t) for t in terms],
        "collection": collection, "exclude": IdArray(exclude),
        "limit": limit, "wk": rank_weights[0], "wi": rank_weights[1], "wr": rank_weights[2],
        "now": now, "today": today,
        "concept_of": TextArray([(concept_of or {}).get(t, t) for t in terms])}
    if not terms:
        return []
    vector, with_vector = "", ""
    if vectors_of is not None:
        params.update(provenance_params(vectors_of))
        vector = f", {sent_vector_sql('e.embedding', vectors_of.dim)} AS vector"
        with_vector = f" LEFT JOIN memory_embeddings e ON e.memory_id = m.id AND {OF_PROVENANCE}"
    columns = "id, importance, created_at, event_date, search_terms"
    probes, sources, found = "", [], []
    if gather:  # one GIN probe per term: ``&&`` over many terms tempts a sequential scan
        probes = (" probed AS MATERIALIZED (SELECT q.term AS found_by, p.*"
                  " FROM unnest(%(gather)s::text[]) AS q (term) CROSS JOIN LATERAL"
                  f" (SELECT {columns} FROM memories"
                  "  WHERE is_active AND search_terms @> ARRAY[q.term]"
                  "  LIMIT %(gather_cap)s) AS p),")
        sources.append(f"(SELECT DISTINCT ON (id) {columns} FROM probed"
                       " LIMIT %(gather_cap)s)")
        # the gathered terms a row holds are those whose probe found it: cutting every row's
        # whole array into its terms to meet the query's was half of the statement's time
        found.append("SELECT pr.id, pr.found_by AS term FROM probed pr"
                     " WHERE pr.id IN (SELECT id FROM gathered)")
    if windowed:  # rows already probed are left out, so no de-duplication is needed
        sources.append(f"SELECT {columns} FROM (SELECT {columns} FROM memories"
                       " WHERE is_active ORDER BY created_at DESC LIMIT %(window)s) AS recent"
                       " WHERE search_terms && %(windowed)s::text[]"
                       + (" AND id NOT IN (SELECT id FROM probed)" if gather else ""))
        found.append("SELECT g.id, w.term FROM gathered g"
                     " CROSS JOIN unnest(%(windowed)s::text[]) AS w (term)"
                     " WHERE w.term = ANY(g.search_terms)")
    size = ("%(collection)s" if collection is not None
            else "(SELECT count(*) FROM memories WHERE is_active)")
    score = (f"%(wk)s::float8 * s.hit / (SELECT weight FROM total)"
             " + %(wi)s::float8 * g.importance / 10.0"
             f" + %(wr)s::float8 * {_RECENCY}")
    return cast(list[CandidateRow], await prepared.fetch_all(
        cur,
        f"WITH{probes} gathered AS MATERIALIZED ({' UNION ALL '.join(sources)}),"
        " held AS MATERIALIZED (SELECT DISTINCT f.id, f.term, q.concept"
        f"   FROM ({' UNION ALL '.join(found)}) AS f"
        "   JOIN unnest(%(terms)s::text[], %(concept_of)s::text[]) AS q (term, concept)"
        "   ON q.term = f.term),"
        " counts AS (SELECT term, count(*) AS n FROM held GROUP BY term),"
        f" weights AS MATERIALIZED (SELECT q.term, ln(({size} + 1.0)"
        "   / (coalesce(q.estimate, c.n, 0) + 1.0)) + 1.0 AS weight"
        "   FROM unnest(%(terms)s::text[], %(estimates)s::bigint[]) AS q (term, estimate)"
        "   LEFT JOIN counts c ON c.term = q.term),"
        " total AS (SELECT sum(weight) AS weight FROM weights"
        "   WHERE term = ANY(%(concept_of)s::text[])),"
        " scores AS (SELECT h.id, sum(w.weight) AS hit"
        "   FROM (SELECT DISTINCT id, concept FROM held) AS h"
        "   JOIN weights w ON w.term = h.concept GROUP BY h.id),"
        f" best AS MATERIALIZED (SELECT g.id, {score} AS score FROM gathered g"
        "   JOIN scores s ON s.id = g.id WHERE NOT (g.id = ANY(%(exclude)s::bigint[]))"
        "   ORDER BY score DESC, g.id DESC LIMIT %(limit)s),"
        # the query terms each returned row holds, gathered for those rows only: aggregated
        # over every gathered row (a thousand at 10,000 memories) the arrays spilled the
        # hash aggregate to disk, a twentieth of the statement's time
        " matched AS (SELECT h.id, array_agg(h.term) AS terms FROM held h"
        "   WHERE h.id IN (SELECT id FROM best) GROUP BY h.id)"
        f" SELECT {MEMORY_COLUMNS}, mt.terms AS search_terms{vector},"
        # on the first row only: the same on every row, and parsed per row it cost more
        # than everything else the statement returns
        " CASE WHEN row_number() OVER (ORDER BY best.score DESC, best.id DESC) = 1"
        "  THEN (SELECT json_object_agg(term, weight) FROM weights) END AS term_weights"
        " FROM best JOIN matched mt ON mt.id = best.id JOIN memories m ON m.id = best.id"
        f"{with_vector} ORDER BY best.score DESC, best.id DESC", params))


def query_term_weights(rows: Sequence[CandidateRow]) -> dict[str, float] | None:
    """The query's term weights ``ranked_candidates`` put on one of its rows (None: no row)."""
    for row in rows:
        weights = row.get("term_weights")
        if weights is not None:
            return {term: float(weight) for term, weight in weights.items()}
    return None


async def fetch_rows(cur: Cursor, ids: Sequence[int], exclude: Sequence[int]
                     ) -> list[CandidateRow]:
    """The active, not excluded memories among ``ids`` (semantic candidates)."""
    if not ids:
        return []
    return cast(list[CandidateRow], await fetch_all(
        cur,
        f"SELECT {MEMORY_COLUMNS}, m.search_terms FROM memories m"
        " WHERE m.id = ANY(%(ids)s::bigint[]) AND m.is_active"
        " AND NOT (m.id = ANY(%(exclude)s::bigint[]))",
        {"ids": IdArray(ids), "exclude": IdArray(exclude)}))


@dataclass
class Neighbourhood:
    """A query's nearest memories and what the search needs of them, from one statement."""

    nearest: list[tuple[int, float]]  # (memory id, cosine), best first
    cosines: dict[int, float]  # cosine of each ``known`` memory that has a vector
    # The leading neighbours' rows (see ``neighbourhood``); None: not fetched (numpy index).
    rows: dict[int, CandidateRow] | None
    # The nearest to the ``across`` vector, with their cosine with the query itself.
    across: list[tuple[int, float]] = field(default_factory=list)


async def neighbourhood(cur: Cursor, provenance: VectorSource, query: np.ndarray, *, k: int,
                        exclude: Sequence[int], known: Sequence[int], rows_within: int,
                        cosines_of: Sequence[int] | None = None,
                        across: np.ndarray | None = None, across_k: int = 0
                        ) -> Neighbourhood:
    """The ``k`` nearest active, not excluded memories (pgvector HNSW), the cosines of the
    ``cosines_of`` memories (default ``known``: the keyword candidates) and the rows of every
    neighbour ranked within ``rows_within`` (ties included) that is not ``known``: one round
    trip once the query's vector is there, where nearest, cosines and a row fetch of the
    admitted took two. With ``across`` (the query with its language's direction taken out),
    also its ``across_k`` nearest, with their rows and their cosine with ``query``.
    Admission itself (``search.fusion``) needs the whole neighbourhood, so it stays in Python;
    rows are fetched for every neighbour that could be admitted by rank."""
    dim = int(provenance.dim)
    # The query vector is parsed once (``q``); the HNSW index still drives ``near``.
    distance = f"e.embedding::vector({dim}) <=> (SELECT v FROM q)"
    blanks = ", ".join(["NULL"] * (len(_MEMORY_NAMES) + 1))
    wanted = list(known if cosines_of is None else cosines_of)
    cosine_part = (f" UNION ALL SELECT 'cosine', e.memory_id, 1 - ({distance}), {blanks}"
                   " FROM memory_embeddings e WHERE e.memory_id = ANY(%(cosines_of)s::bigint[])"
                   f" AND {OF_PROVENANCE}") if wanted else ""
    across_part, across_q = "", ""
    if across is not None and across_k > 0:
        across_q = f", a AS MATERIALIZED (SELECT %(a)s::vector({dim}) AS v)"
        across_part = (
            f" UNION ALL SELECT 'across', x.id, x.cosine, {MEMORY_COLUMNS}, m.search_terms"
            f" FROM (SELECT e.memory_id AS id, 1 - ({distance}) AS cosine"
            "   FROM memory_embeddings e JOIN memories m ON m.id = e.memory_id"
            f"  WHERE {OF_PROVENANCE} AND m.is_active"
            "   AND NOT (m.id = ANY(%(exclude)s::bigint[]))"
            f"  ORDER BY e.embedding::vector({dim}) <=> (SELECT v FROM a) LIMIT %(across_k)s)"
            " AS x LEFT JOIN memories m ON m.id = x.id"
            "  AND NOT (x.id = ANY(%(known)s::bigint[]))")
    await prepared.execute(
        cur,
        f"WITH q AS MATERIALIZED (SELECT %(q)s::vector({dim}) AS v){across_q},"
        f" near AS MATERIALIZED (SELECT e.memory_id AS id, 1 - ({distance}) AS cosine"
        "   FROM memory_embeddings e JOIN memories m ON m.id = e.memory_id"
        f"  WHERE {OF_PROVENANCE} AND m.is_active"
        "   AND NOT (m.id = ANY(%(exclude)s::bigint[]))"
        f"  ORDER BY {distance} LIMIT %(k)s),"
        " ranked AS (SELECT id, cosine, rank() OVER (ORDER BY cosine DESC) AS place FROM near)"
        f" SELECT 'near' AS kind, r.id AS hit, r.cosine, {MEMORY_COLUMNS}, m.search_terms"
        " FROM ranked r LEFT JOIN memories m ON m.id = r.id AND r.place <= %(within)s"
        f"  AND NOT (r.id = ANY(%(known)s::bigint[])){cosine_part}{across_part}",
        {**knn_params(provenance, query, k, exclude), "known": IdArray(known),
         "within": rows_within, "cosines_of": IdArray(wanted), "across_k": across_k,
         "a": vector_literal(across) if across is not None else None},
        ahead="SET hnsw.ef_search = %(ef)s; SET hnsw.iterative_scan = relaxed_order; ")
    nearest: list[tuple[int, float]] = []
    found_across: list[tuple[int, float]] = []
    cosines: dict[int, float] = {}
    rows: dict[int, CandidateRow] = {}
    for row in rows_as_dicts(cur, await cur.fetchall()):
        hit, cosine, kind = int(row.pop("hit")), float(row.pop("cosine")), row.pop("kind")
        if kind == "cosine":
            cosines[hit] = cosine
            continue
        (nearest if kind == "near" else found_across).append((hit, cosine))
        if row["id"] is not None:
            rows[hit] = cast(CandidateRow, row)
    nearest.sort(key=lambda item: -item[1])
    return Neighbourhood(nearest, cosines, rows, found_across)


async def touch_accessed(cur: Cursor, ids: Sequence[int], granularity_seconds: float
                         ) -> None:
    """Record that these memories were just returned by a search.

    Rows touched within ``granularity_seconds`` are left alone: a search per chat turn would
    otherwise rewrite the same rows (and their index entries) over and over.
    """
    if not ids:
        return
    await cur.execute(
        "UPDATE memories SET last_accessed = now() WHERE id = ANY(%s::bigint[])"
        " AND (last_accessed IS NULL"
        "      OR last_accessed < now() - make_interval(secs => %s))",
        (IdArray(ids), granularity_seconds))
