"""What becomes of each setting a 4.x dashboard saved (its ``gateway_config`` rows).

4.x saved every field of its settings form as text, defaults included, and read an empty
value as "not set" (the environment applied). So a saved value is carried over as ours when
it means the same here, with these exceptions, each reported with its reason:

- renamed keys (``systemPrompt``, ``partition_session_id``) are carried under our names;
- a value equal to 4.1.3's default of a setting whose default we changed is the old default,
  not a choice: ours applies (the vector switch and the hybrid weights);
- a threshold whose scale changed is not carried (ours follows the embedding provider);
- removed settings, our restart-only ones (they live in the environment) and unknown keys
  are listed, not stored; a value that does not parse as our setting is listed with why.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pawwake.llm.embeddings import provider_for
from pawwake.removed_settings import REMOVED
from pawwake.settings import BY_NAME, Settings
from pawwake.settings.entry import SettingError
from pawwake.settings.values import parse_value

RENAMED = {"systemPrompt": "SYSTEM_PROMPT", "partition_session_id": "PARTITION_SESSION_ID"}

# 4.1.3's defaults of the settings whose default is different here, as 4.x saved them.
OLD_DEFAULTS: dict[str, Any] = {
    "MEMORY_VECTOR_ENABLED": False,
    "MEMORY_HW_KEYWORD": 0.35,
    "MEMORY_HW_SEMANTIC": 0.35,
    "MEMORY_HW_IMPORTANCE": 0.15,
    "MEMORY_HW_RECENCY": 0.15,
    "CONVERSATION_MIN_SCORE_THRESHOLD": 0.7,
}

NOT_CARRIED = {
    "MEMORY_SEMANTIC_THRESHOLD": (
        "its scale changed: ours is a noise floor on raw cosine that follows the embedding "
        "provider (api 0.3, local model 0.78) and admits candidates by rank; 4.x's cut-off "
        "(0.5 or 0.7) would hide most semantic matches"),
}

# 4.x's own bookkeeping in gateway_config; read where useful, never stored as settings.
INTERNAL = {"database_instance_id", "embedding_vector_source", "embedding_detection"}

# Thresholds on raw cosine carry over only while the same kind of vectors is in force.
COSINE_SCALED = {"CONVERSATION_MIN_SCORE_THRESHOLD"}


@dataclass
class SettingsPlan:
    """The values to store as ours, and a note per 4.x key (outcome, reason)."""

    carried: dict[str, Any] = field(default_factory=dict)
    notes: dict[str, tuple[str, str]] = field(default_factory=dict)

    def outcomes(self) -> dict[str, list[str]]:
        grouped: dict[str, list[str]] = {}
        for key, (outcome, _reason) in sorted(self.notes.items()):
            grouped.setdefault(outcome, []).append(key)
        return grouped


def plan_settings(saved: Mapping[str, str | None], base: Settings) -> SettingsPlan:
    """Decide every saved 4.x key; ``base`` are the settings from the environment."""
    plan = SettingsPlan()
    for key, raw in sorted(saved.items()):
        name = RENAMED.get(key, key)
        outcome, reason, value = _decide(key, name, raw)
        plan.notes[key] = (outcome, reason)
        if outcome in ("carried", "renamed"):
            plan.carried[name] = value
    in_force = base.with_values(plan.carried)
    for name in COSINE_SCALED & set(plan.carried):
        if provider_for(in_force) != "api":
            del plan.carried[name]
            plan.notes[name] = ("not_carried", "tuned for API vectors; the local model in "
                                "force has its own scale (empty: the provider's default)")
    return plan


def _decide(key: str, name: str, raw: str | None) -> tuple[str, str, Any]:
    if key in INTERNAL:
        return "internal", "4.x bookkeeping", None
    if name in REMOVED:
        return "removed", "removed; use instead: " + REMOVED[name], None
    if name in NOT_CARRIED:
        return "not_carried", NOT_CARRIED[name], None
    setting = BY_NAME.get(name)
    if setting is None:
        return "unknown", "not a setting of this version", None
    if not setting.hot:
        return "restart_only", "set in the environment (restart-only here)", None
    if raw is None or not raw.strip():
        return "empty", "4.x read an empty value as not set: the environment applies", None
    try:
        value = parse_value(setting, raw)
    except SettingError as exc:
        return "invalid", exc.message, None
    if name in OLD_DEFAULTS and value == OLD_DEFAULTS[name]:
        return "old_default", f"4.1.3's default; this version's default ({setting.default}) " \
                              "applies", None
    return ("renamed" if name != key else "carried"), "", value


def legacy_vector_source(saved: Mapping[str, str | None], base: Settings
                         ) -> tuple[str, int]:
    """(model, dimension) that made the 4.x vectors: its recorded source when it kept one,
    else the embedding model and dimension it had saved or took from the environment."""
    recorded = saved.get("embedding_vector_source")
    if recorded:
        try:
            _base_url, model, dim = json.loads(recorded)
            return str(model), int(dim)
        except (ValueError, TypeError):
            pass
    model = (saved.get("EMBEDDING_MODEL") or "").strip() or base.EMBEDDING_MODEL
    try:
        dim = int(str(saved.get("EMBEDDING_DIM") or "").strip() or base.EMBEDDING_DIM)
    except ValueError:
        dim = int(base.EMBEDDING_DIM)
    return model, dim
