"""The gateway_config table: hot settings saved from the dashboard, and runtime flags."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pawwake.db.pool import Cursor, fetch_all
from pawwake.text.storable import storable_json


async def load_overrides(cur: Cursor) -> dict[str, Any]:
    rows = await fetch_all(cur, "SELECT key, value FROM gateway_config")
    return {row["key"]: row["value"] for row in rows}


async def save_overrides(cur: Cursor, values: Mapping[str, Any]) -> None:
    """Upsert several settings; the caller's transaction makes a save all or nothing."""
    for key, value in values.items():
        await cur.execute(
            "INSERT INTO gateway_config (key, value) VALUES (%s, %s::jsonb)"
            " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = now()",
            (key, storable_json(value)))

