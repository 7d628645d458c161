"""What a 4.x database holds and what adoption makes of it: the plan (settings carried,
vectors kept or not) and the survey (counts, rows it cannot take), shared by the adoption,
its log lines and the dry run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pawwake.db.legacy import conversations, memories, threads, vectors
from pawwake.db.legacy.schema import LegacySchema
from pawwake.db.pool import Cursor
from pawwake.llm.embeddings import provider_for
from pawwake.settings import Settings
from pawwake.upgrade.settings_map import SettingsPlan, legacy_vector_source, plan_settings


@dataclass(frozen=True)
class Plan:
    """The decisions adoption takes before copying anything."""

    settings: SettingsPlan
    in_force: Settings  # the environment with the carried settings: what will run
    vectors_from: tuple[str, int]  # (model, dimension) that made the 4.x vectors
    keep_vectors: dict[str, Any] | None  # the provenance kept vectors get, or None
    vectors_reason: str


async def saved_settings(cur: Cursor, legacy: LegacySchema) -> dict[str, str | None]:
    if not legacy.has("gateway_config"):
        return {}
    await cur.execute(f"SELECT key, value::text FROM {legacy.schema}.gateway_config"
                      " WHERE key IS NOT NULL")
    return {str(key): value for key, value in await cur.fetchall()}


async def make_plan(cur: Cursor, legacy: LegacySchema, base: Settings) -> Plan:
    saved = await saved_settings(cur, legacy)
    settings = plan_settings(saved, base)
    in_force = base.with_values(settings.carried)
    model, dim = legacy_vector_source(saved, base)
    keep: dict[str, Any] | None = None
    if provider_for(in_force) != "api":
        reason = ("re-embedded in the background: the local model is in force "
                  "(no EMBEDDING_API_KEY), 4.x vectors came from an API")
    elif in_force.EMBEDDING_MODEL != model:
        reason = (f"re-embedded in the background: 4.x vectors came from {model}, "
                  f"{in_force.EMBEDDING_MODEL} is in force")
    elif int(in_force.EMBEDDING_DIM) != dim:
        reason = (f"re-embedded in the background: 4.x vectors have {dim} dimensions, "
                  f"{in_force.EMBEDDING_DIM} are in force")
    else:
        keep = {"provider": "api", "model": model, "dim": dim}
        reason = f"kept: {model}, {dim} dimensions, as in force"
    return Plan(settings, in_force, (model, dim), keep, reason)


async def survey(cur: Cursor, legacy: LegacySchema, plan: Plan) -> dict[str, Any]:
    """Everything the dry run prints and the status page counts (JSON-ready)."""
    return {
        "version": legacy.version,
        "tables": legacy.tables,
        "memories": await memories.survey(cur, legacy),
        "conversations": await conversations.survey(cur, legacy),
        "usage": await conversations.survey_usage(cur, legacy),
        "threads": await threads.survey(cur, legacy),
        "vectors": {"memories": await vectors.survey(cur, legacy, "memories"),
                    "conversations": await vectors.survey(cur, legacy, "conversations"),
                    "made_by": list(plan.vectors_from), "decision": plan.vectors_reason},
        "settings": {key: list(note) for key, note in sorted(plan.settings.notes.items())},
    }


def report_lines(found: dict[str, Any]) -> list[str]:
    """The dry run's report: what would be adopted, then every row it cannot take."""
    return [f"Pawwake {found['version']} database found (tables: "
            f"{', '.join(found['tables'])}).", "Would adopt:", *_would_adopt(found),
            "Adjusted on the way:", *(adjustments(found) or ["  nothing"]),
            "Cannot take (left in the kept 4.x tables):", *(cannot_take(found) or ["  nothing"])]


def _would_adopt(found: dict[str, Any]) -> list[str]:
    mem, conv = found.get("memories", {}), found.get("conversations", {})
    usage, thr, vec = found.get("usage", {}), found.get("threads", {}), found["vectors"]
    carried = [k for k, (outcome, _) in found.get("settings", {}).items()
               if outcome in ("carried", "renamed")]
    return [
        f"  memories: {mem.get('adopted', 0)} (fragments {mem.get('fragments', 0)}, events "
        f"{mem.get('events', 0)}, core {mem.get('core', 0)}; archived {mem.get('archived', 0)},"
        f" merged {mem.get('merged', 0)}, superseded {mem.get('superseded', 0)}; reminders "
        f"{mem.get('reminders', 0)}: delivered {mem.get('reminders_delivered', 0)}, claimed "
        f"{mem.get('reminders_claimed', 0)})",
        f"  messages: {conv.get('adopted', 0)} in {conv.get('sessions', 0)} conversations "
        f"(tool calls {conv.get('tool_calls', 0)}, tool results {conv.get('tool_results', 0)},"
        f" with reasoning {conv.get('reasoning', 0)}, in the trash {conv.get('in_trash', 0)})",
        f"  token usage rows: {usage.get('adopted', 0)} ({usage.get('tokens', 0)} tokens)",
        f"  partition threads: {thr.get('threads', 0)} (with a summary "
        f"{thr.get('with_summary', 0)}, rotated {thr.get('rotated', 0)})",
        f"  vectors: memories {vec['memories']['with_vector']}, messages "
        f"{vec['conversations']['with_vector']}; {vec['decision']}",
        f"  saved settings carried: {', '.join(carried) or 'none'}",
    ]


def adjustments(found: dict[str, Any]) -> list[str]:
    """What changes on the way in: defaulted fields, and settings not carried (and why)."""
    mem, conv = found.get("memories", {}), found.get("conversations", {})
    adjusted = [
        (mem.get("layer_defaulted", 0), "memories without a known layer become fragments"),
        (mem.get("importance_adjusted", 0), "memories get an importance within 1..10"),
        (mem.get("dangling_merge_sources", 0),
         "merge sources name a missing memory (kept; the backup repair clears them)"),
        (conv.get("metadata_unreadable", 0),
         "messages have metadata that is not a JSON object (kept as legacy_metadata)"),
    ]
    lines = [f"  {count} {what}" for count, what in adjusted if count]
    return lines + [f"  setting {key}: {outcome} ({why})"
                    for key, (outcome, why) in found.get("settings", {}).items()
                    if outcome not in ("carried", "renamed", "internal")]


def cannot_take(found: dict[str, Any]) -> list[str]:
    mem, conv = found.get("memories", {}), found.get("conversations", {})
    usage = found.get("usage", {})
    lines = []
    if mem.get("blank"):
        lines.append(f"  {mem['blank']} memories with blank content (ids "
                     f"{_listed(mem.get('blank_ids', []), mem['blank'])})")
    if conv.get("other_roles"):
        rows = _listed(conv.get("other_role_rows", []), conv["other_roles"])
        lines.append(f"  {conv['other_roles']} messages with a role other than system, user,"
                     f" assistant or tool ({rows})")
    if usage.get("other_types"):
        lines.append(f"  {usage['other_types']} token usage rows of other types "
                     f"({', '.join(usage.get('other_type_names', []))})")
    return lines


def _listed(items: list[Any], total: int) -> str:
    shown = ", ".join(str(item) for item in items)
    return shown + (f", and {total - len(items)} more" if total > len(items) else "")


def summary_lines(version: str, counts: dict[str, dict[str, Any]], found: dict[str, Any]
                  ) -> list[str]:
    """The log's account of a finished adoption."""
    def adopted(step: str) -> int:
        return int(counts.get(step, {}).get("adopted", 0))

    thread = counts.get("threads", {})
    return [
        f"adopted the Pawwake {version} database: {adopted('memories')} memories, "
        f"{adopted('conversations')} messages, {adopted('usage')} token usage rows, "
        f"{thread.get('adopted', 0)} partition threads ({thread.get('with_summary', 0)} with"
        f" a summary), {len(counts.get('settings', {}).get('stored', []))} saved settings",
        f"vectors: {adopted('memories_vectors')} memory and {adopted('conversations_vectors')}"
        f" message vectors kept; {found.get('vectors', {}).get('decision', '')}",
        *(line.strip() for line in adjustments(found)),
        *("not taken: " + line.strip() for line in cannot_take(found)),
        "the 4.x tables stay in the schema pawwake4; to go back to 4.x run"
        " SELECT pawwake4.roll_back_upgrade(); (see the README's upgrade section)",
    ]
