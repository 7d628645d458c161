"""What the settings tests share: the saved values as the database holds them, and the
settings API's list by name."""

from __future__ import annotations

from typing import Any

import psycopg2


def stored_settings(database_url: str) -> dict[str, Any]:
    """The saved settings (``gateway_config``), read outside the gateway."""
    conn = psycopg2.connect(database_url)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT key, value FROM gateway_config")
            return dict(cur.fetchall())
    finally:
        conn.close()


def by_name(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``GET /api/settings``'s items by setting name."""
    return {item["name"]: item for item in body["settings"]}
