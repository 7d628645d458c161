"""Memory writes that need vectors queue the embedding job in their own transaction: when the
job cannot be queued, the write is not kept either (never a stored row nobody will embed)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.memory_support import create, row, rows, sql

REFUSE = ("CREATE FUNCTION refuse_embedding() RETURNS trigger LANGUAGE plpgsql AS"
          " $$ BEGIN RAISE EXCEPTION 'no embedding jobs today'; END $$")
TRIGGER = ("CREATE TRIGGER refuse_embedding BEFORE INSERT ON jobs FOR EACH ROW"
           " WHEN (NEW.kind = 'memory_embed') EXECUTE FUNCTION refuse_embedding()")


@pytest.fixture
async def api(make_client: Any) -> Any:
    """The real app without background workers (queued jobs stay where tests see them)."""
    return await make_client(JOB_WORKERS=0)


async def refuse_embedding_jobs(api: Any) -> None:
    await sql(api, "DELETE FROM jobs")
    await sql(api, REFUSE)
    await sql(api, TRIGGER)


async def test_an_edit_and_its_embedding_job_commit_together(api: Any) -> None:
    made = await create(api, "用户喜欢喝咖啡")
    await refuse_embedding_jobs(api)
    response = await api.put(f"/api/memories/{made['id']}", json={"content": "用户改喝绿茶了"})
    assert response.status >= 500
    stored = await row(api, made["id"])
    assert stored is not None and stored["content"] == "用户喜欢喝咖啡"


async def test_a_text_import_and_its_embedding_job_commit_together(api: Any) -> None:
    await refuse_embedding_jobs(api)
    response = await api.post("/api/memories/import/text",
                              json={"text": "周末去爬山\n喜欢吃辣", "skip_scoring": True})
    assert response.status >= 500
    assert await rows(api) == []

