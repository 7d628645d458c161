"""The gateway_config table: hot settings saved from the dashboard, and runtime flags."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aiopg

from pawwake.db.pool import fetch_all, transaction
from pawwake.text.storable import storable_json


async def load_overrides(pool: aiopg.Pool) -> dict[str, Any]:
    rows = await fetch_all(pool, "SELECT key, value FROM gateway_config")
    return {row["key"]: row["value"] for row in rows}


async def save_overrides(pool: aiopg.Pool, values: Mapping[str, Any]) -> None:
    """Upsert several settings in one transaction, so a save is all or nothing."""
    async with transaction(pool) as cur:
        for key, value in values.items():
            await cur.execute(
                "INSERT INTO gateway_config (key, value) VALUES (%s, %s::jsonb)"
                " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = now()",
                (key, storable_json(value)))

