"""Statements that run outside any transaction (CREATE DATABASE, DROP TABLE on a test's own
database...), each on a connection of its own: for fixtures and benchmarks alike."""

from __future__ import annotations

import psycopg2


def run_autocommit(uri: str, sql: str) -> None:
    """Run ``sql`` on the database at ``uri`` in autocommit mode, then close the connection."""
    conn = psycopg2.connect(uri)
    conn.autocommit = True
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
    finally:
        conn.close()
