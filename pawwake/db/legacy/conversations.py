"""4.x messages and token usage into ours.

Messages keep their ids (memories name them as sources, partition state counts from them)
and their ``metadata``, which 4.x kept as JSON text: tool calls (with every provider extra
inside them, such as Gemini's ``thought_signature``), ``tool_call_id``, ``name`` and
``reasoning_content`` are the very keys our replay reads. Text that does not parse as a JSON
object is kept under ``legacy_metadata`` rather than dropped. A message is taken unless its
role is not one of ours; its search terms are left NULL, which our catch-up indexer fills.
"""

from __future__ import annotations

from typing import Any

from pawwake.db.legacy.helpers import batch_copy, counts_of, run_batch
from pawwake.db.legacy.schema import LegacySchema
from pawwake.db.pool import Cursor, fetch_one

ROLES = "('system', 'user', 'assistant', 'tool')"
TAKEABLE = f"t.role IN {ROLES} AND t.session_id IS NOT NULL"
USAGE_TYPES = "('chat', 'summary', 'extract', 'consolidate', 'embed')"
USAGE_TAKEABLE = f"coalesce(t.usage_type, 'chat') IN {USAGE_TYPES}"

_TARGET = "id, session_id, role, content, model, created_at, metadata, deleted_at, source"


def _metadata(legacy: LegacySchema, *, lenient: bool = True) -> tuple[str, str]:
    """(a LATERAL that parses ``t.metadata`` once as ``p.parsed``, the metadata value).
    Not ``lenient``: a plain cast, which fails the statement on text that does not parse."""
    if not legacy.has("conversations", "metadata"):
        return "", "'{}'::jsonb"
    if legacy.type_of("conversations", "metadata") in ("json", "jsonb"):
        parse = "t.metadata::jsonb"
    else:
        parse = "pg_temp.pawwake_jsonb(t.metadata)" if lenient else "t.metadata::jsonb"
    lateral = (" CROSS JOIN LATERAL (SELECT CASE WHEN btrim(coalesce(t.metadata::text, ''))"
               f" = '' THEN NULL ELSE {parse} END AS parsed) p")
    value = ("CASE WHEN p.parsed IS NOT NULL AND jsonb_typeof(p.parsed) = 'object'"
             " THEN p.parsed"
             " WHEN btrim(coalesce(t.metadata::text, '')) IN ('', 'null') THEN '{}'::jsonb"
             " ELSE jsonb_build_object('legacy_metadata', t.metadata::text) END")
    return lateral, value


async def copy_batch(cur: Cursor, legacy: LegacySchema, after: int, limit: int
                     ) -> tuple[int | None, int]:
    """Copy the next ``limit`` messages after id ``after``: (last id read, rows inserted)."""
    deleted = "t.deleted_at" if legacy.has("conversations", "deleted_at") else "NULL"

    def statement(lenient: bool) -> str:
        lateral, metadata = _metadata(legacy, lenient=lenient)
        return batch_copy(
            f"{legacy.schema}.conversations", f"conversations ({_TARGET})",
            "t.id, t.session_id, t.role, coalesce(t.content, ''), t.model,"
            f" coalesce(t.created_at, now()), {metadata}, {deleted}, 'gateway'",
            where=TAKEABLE, join=lateral)

    return await run_batch(cur, statement, {"after": after, "limit": limit})


async def survey(cur: Cursor, legacy: LegacySchema) -> dict[str, Any]:
    if not legacy.has("conversations"):
        return {}
    lateral, _ = _metadata(legacy)
    parsed = "p.parsed" if lateral else "NULL::jsonb"
    readable = (f"({parsed} IS NOT NULL AND jsonb_typeof({parsed}) = 'object'"
                " OR btrim(coalesce(t.metadata::text, '')) IN ('', 'null'))"
                if lateral else "true")
    deleted = "t.deleted_at IS NOT NULL" if legacy.has("conversations", "deleted_at") \
        else "false"
    row = await fetch_one(cur, (
        "SELECT count(*) AS total,"
        f" count(*) FILTER (WHERE {TAKEABLE}) AS adopted,"
        f" count(*) FILTER (WHERE NOT ({TAKEABLE})) AS other_roles,"
        f" count(DISTINCT t.session_id) FILTER (WHERE {TAKEABLE}) AS sessions,"
        f" count(*) FILTER (WHERE {TAKEABLE} AND {deleted}) AS in_trash,"
        f" count(*) FILTER (WHERE {TAKEABLE} AND {parsed} ? 'tool_calls') AS tool_calls,"
        f" count(*) FILTER (WHERE {TAKEABLE} AND {parsed} ? 'tool_call_id') AS tool_results,"
        f" count(*) FILTER (WHERE {TAKEABLE} AND {parsed} ? 'reasoning_content')"
        "   AS reasoning,"
        f" count(*) FILTER (WHERE {TAKEABLE} AND NOT {readable}) AS metadata_unreadable"
        f" FROM {legacy.schema}.conversations t{lateral}"))
    counts = counts_of(row)
    await cur.execute(f"SELECT t.id, t.role FROM {legacy.schema}.conversations t"
                      f" WHERE NOT ({TAKEABLE}) ORDER BY t.id LIMIT 50")
    counts["other_role_rows"] = [f"{r[0]} ({r[1]})" for r in await cur.fetchall()]
    return counts


async def copy_usage(cur: Cursor, legacy: LegacySchema, after: int, limit: int
                     ) -> tuple[int | None, int]:
    """Copy the next ``limit`` token_usage rows after id ``after`` (ours gives new ids)."""
    sql = batch_copy(
        f"{legacy.schema}.token_usage", "token_usage (session_id, model, prompt_tokens,"
        " completion_tokens, total_tokens, usage_type, created_at)",
        "t.session_id, t.model, coalesce(t.prompt_tokens, 0),"
        " coalesce(t.completion_tokens, 0), coalesce(t.total_tokens, 0),"
        " coalesce(t.usage_type, 'chat'), coalesce(t.created_at, now())",
        where=USAGE_TAKEABLE)
    return await run_batch(cur, lambda _lenient: sql, {"after": after, "limit": limit})


async def survey_usage(cur: Cursor, legacy: LegacySchema) -> dict[str, Any]:
    if not legacy.has("token_usage"):
        return {}
    row = await fetch_one(cur, (
        f"SELECT count(*) AS total, count(*) FILTER (WHERE {USAGE_TAKEABLE}) AS adopted,"
        f" count(*) FILTER (WHERE NOT ({USAGE_TAKEABLE})) AS other_types,"
        f" coalesce(sum(t.total_tokens) FILTER (WHERE {USAGE_TAKEABLE}), 0) AS tokens"
        f" FROM {legacy.schema}.token_usage t"))
    counts = counts_of(row)
    await cur.execute(f"SELECT DISTINCT t.usage_type FROM {legacy.schema}.token_usage t"
                      f" WHERE NOT ({USAGE_TAKEABLE}) ORDER BY 1 LIMIT 20")
    counts["other_type_names"] = [str(r[0]) for r in await cur.fetchall()]
    return counts
