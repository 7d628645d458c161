"""The adoption's own record: started, per-step progress and counts, finished."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pawwake.db.pool import Cursor, fetch_all, fetch_one
from pawwake.text.storable import storable_json


@dataclass(frozen=True)
class Step:
    name: str
    position: int = 0
    counts: dict[str, Any] = field(default_factory=dict)
    done: bool = False


@dataclass(frozen=True)
class Adoption:
    """A recorded adoption: what was found, when, and every step's counts so far."""

    version: str
    survey: dict[str, Any]
    started_at: datetime
    finished_at: datetime | None
    steps: dict[str, Step]


async def begin(cur: Cursor, version: str) -> None:
    await cur.execute("INSERT INTO legacy_adoption (version) VALUES (%s)"
                      " ON CONFLICT (id) DO NOTHING", (version,))


async def save_survey(cur: Cursor, survey: Mapping[str, Any]) -> None:
    await cur.execute("UPDATE legacy_adoption SET survey = %s::jsonb",
                      (storable_json(dict(survey)),))


async def load(cur: Cursor) -> Adoption | None:
    row = await fetch_one(cur, "SELECT version, survey, started_at, finished_at"
                               " FROM legacy_adoption")
    if row is None:
        return None
    steps = {r["step"]: Step(r["step"], int(r["position"]), dict(r["counts"]),
                             r["done_at"] is not None)
             for r in await fetch_all(cur, "SELECT step, position, counts, done_at"
                                           " FROM legacy_adoption_steps")}
    return Adoption(row["version"], dict(row["survey"]), row["started_at"],
                    row["finished_at"], steps)


async def lock_step(cur: Cursor, name: str) -> Step:
    """The step's row, locked for this transaction (made when missing)."""
    await cur.execute("INSERT INTO legacy_adoption_steps (step) VALUES (%s)"
                      " ON CONFLICT (step) DO NOTHING", (name,))
    row = await fetch_one(cur, "SELECT position, counts, done_at FROM legacy_adoption_steps"
                               " WHERE step = %s FOR UPDATE", (name,))
    assert row is not None
    return Step(name, int(row["position"]), dict(row["counts"]), row["done_at"] is not None)


async def save_step(cur: Cursor, step: Step) -> None:
    await cur.execute(
        "UPDATE legacy_adoption_steps SET position = %s, counts = %s::jsonb,"
        " done_at = CASE WHEN %s THEN now() END, updated_at = now() WHERE step = %s",
        (step.position, storable_json(step.counts), step.done, step.name))


async def finish(cur: Cursor) -> None:
    await cur.execute("UPDATE legacy_adoption SET finished_at = now()"
                      " WHERE finished_at IS NULL")
