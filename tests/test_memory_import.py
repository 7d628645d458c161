"""Plain-text import (with and without model scoring) and the operator's seed file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aiohttp import FormData
from aiohttp.test_utils import TestClient

from pawwake.db.pool import cursor, fetch_all
from pawwake.services import services_of
from tests.fake_upstream import FakeUpstream
from tests.gateway_support import GATEWAY_KEY
from tests.memory_support import create, error_of, rows

EXAMPLE_SEED = Path(__file__).resolve().parents[1] / "seed_memories.example.json"


@pytest.fixture
async def api(make_client: Any) -> TestClient:
    return await make_client(JOB_WORKERS=0, MEMORY_MODEL="test/memory-model")


@pytest.fixture
async def keyed_api(make_client: Any) -> TestClient:
    """File uploads (multipart) need a gateway key: without one, /api takes JSON only."""
    return await make_client(JOB_WORKERS=0, MEMORY_MODEL="test/memory-model",
                             GATEWAY_SECRET=GATEWAY_KEY)


KEYED = {"X-Gateway-Key": GATEWAY_KEY}


async def import_text(api: TestClient, text: str, skip_scoring: bool = False) -> Any:
    return await api.post("/api/memories/import/text",
                          json={"text": text, "skip_scoring": skip_scoring})


async def importance_by_content(api: TestClient) -> dict[str, int]:
    return {r["content"]: r["importance"] for r in await rows(api)}


async def test_skip_scoring_imports_new_lines_at_five(api: TestClient,
                                                      upstream: FakeUpstream) -> None:
    await create(api, "用户喜欢猫", importance=9)
    text = "用户喜欢猫\n\n  用户喜欢狗  \nthe user likes TEA\nThe User  likes tea\n"
    response = await import_text(api, text, skip_scoring=True)
    assert response.status == 200
    report = await response.json()
    assert (report["imported"], report["skipped"], report["scored"]) == (2, 2, 0)
    assert report["warnings"] == []
    assert await importance_by_content(api) == {"用户喜欢猫": 9, "用户喜欢狗": 5,
                                                "the user likes TEA": 5}
    assert all(r["layer"] == 1 and r["search_terms"] for r in await rows(api))
    assert upstream.requests == []


async def test_lines_are_scored_by_the_memory_model(api: TestClient,
                                                    upstream: FakeUpstream) -> None:
    upstream.reply_text("[7, 3]")
    report = await (await import_text(api, "用户在上海工作\n用户今天吃了面条")).json()
    assert (report["imported"], report["scored"], report["warnings"]) == (2, 2, [])
    assert await importance_by_content(api) == {"用户在上海工作": 7, "用户今天吃了面条": 3}
    [sent] = upstream.requests
    assert sent.body["model"] == "test/memory-model" and sent.body["stream"] is False
    assert "1. 用户在上海工作\n2. 用户今天吃了面条" in sent.body["messages"][-1]["content"]
    assert "2 objects" in sent.body["messages"][0]["content"]


async def test_scoring_runs_in_batches_of_twenty(make_client: Any,
                                                 upstream: FakeUpstream) -> None:
    api = await make_client(JOB_WORKERS=0)  # no MEMORY_MODEL: DEFAULT_MODEL scores
    upstream.reply_text(json.dumps([8] * 20))
    upstream.reply_text("```json\n[2, 2, 2, 2, 2]\n```")
    lines = [f"第{n}条记忆内容" for n in range(25)]
    report = await (await import_text(api, "\n".join(lines))).json()
    assert (report["imported"], report["scored"]) == (25, 25)
    assert [len(r.body["messages"][-1]["content"].splitlines()) for r in upstream.requests] \
        == [20, 5]
    assert {r.body["model"] for r in upstream.requests} == {"test/model-a"}
    scores = await importance_by_content(api)
    assert [scores[line] for line in lines] == [8] * 20 + [2] * 5


@pytest.mark.parametrize("answer", ["These all look important to me.", "[7]",
                                    '[7, "high"]', "[true, 3]"])
async def test_a_malformed_scoring_answer_falls_back_to_five(api: TestClient,
                                                             upstream: FakeUpstream,
                                                             answer: str) -> None:
    upstream.reply_text(answer)
    report = await (await import_text(api, "用户会弹钢琴\n用户讨厌下雨天")).json()
    assert (report["imported"], report["scored"]) == (2, 0)
    assert len(report["warnings"]) == 1 and "lines 1-2" in report["warnings"][0]
    assert set((await importance_by_content(api)).values()) == {5}


async def test_an_upstream_failure_falls_back_to_five(api: TestClient,
                                                      upstream: FakeUpstream) -> None:
    upstream.reply_error(500, "model crashed")
    report = await (await import_text(api, "用户会游泳")).json()
    assert (report["imported"], report["scored"]) == (1, 0)
    assert "500" in report["warnings"][0]
    assert await importance_by_content(api) == {"用户会游泳": 5}


async def test_archived_rows_do_not_block_a_line(api: TestClient) -> None:
    made = await create(api, "用户以前住在北京")
    await api.delete(f"/api/memories/{made['id']}")
    report = await (await import_text(api, "用户以前住在北京", skip_scoring=True)).json()
    assert report["imported"] == 1


async def test_a_file_upload_imports_too(keyed_api: TestClient, upstream: FakeUpstream) -> None:
    form = FormData()
    form.add_field("file", "\ufeff第一行\r\n第二行\r\n".encode(), filename="memories.txt",
                   content_type="text/plain")
    form.add_field("skip_scoring", "on")
    response = await keyed_api.post("/api/memories/import/text", data=form, headers=KEYED)
    assert response.status == 200
    assert (await response.json())["imported"] == 2
    assert set(await importance_by_content(keyed_api)) == {"第一行", "第二行"}
    assert upstream.requests == []


@pytest.mark.parametrize(("body", "code"), [({"skip_scoring": True}, "invalid_field"),
                                            ({"text": "x", "skip_scoring": "yes"},
                                             "invalid_field"),
                                            ({"text": "x", "extra": 1}, "unknown_field")])
async def test_text_import_validates_its_body(api: TestClient, body: dict[str, Any],
                                              code: str) -> None:
    response = await api.post("/api/memories/import/text", json=body)
    assert response.status == 400 and (await error_of(response))["code"] == code


async def test_a_file_that_is_not_utf8_is_refused(keyed_api: TestClient) -> None:
    form = FormData()
    form.add_field("file", "用户喜欢猫".encode("gbk"), filename="gbk.txt")
    response = await keyed_api.post("/api/memories/import/text", data=form, headers=KEYED)
    assert response.status == 400
    assert (await error_of(response))["code"] == "invalid_encoding"
    assert await rows(keyed_api) == []


# --- seed file -----------------------------------------------------------------------------

def data_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "data"  # PAWWAKE_DATA_DIR in the test settings
    folder.mkdir(parents=True, exist_ok=True)
    return folder


async def test_seed_without_a_file_is_404(api: TestClient) -> None:
    response = await api.get("/import/seed-memories")
    assert response.status == 404
    problem = await error_of(response)
    assert problem["code"] == "seed_file_not_found"
    assert "seed_memories.json" in problem["message"]


async def test_seed_json_imports_once(api: TestClient, tmp_path: Path) -> None:
    seed = data_dir(tmp_path) / "seed_memories.json"
    items = json.loads(EXAMPLE_SEED.read_text(encoding="utf-8"))
    seed.write_text(json.dumps(items, ensure_ascii=False), encoding="utf-8")

    first = await api.get("/import/seed-memories")
    assert first.status == 200
    assert await first.json() == {"status": "done", "file": "seed_memories.json",
                                  "imported": len(items), "skipped": 0, "past_reminders": 0}
    again = await (await api.get("/import/seed-memories")).json()
    assert (again["imported"], again["skipped"]) == (0, len(items))

    seed.write_text(json.dumps([*items, {"content": "用户学会了骑车"}], ensure_ascii=False),
                    encoding="utf-8")
    third = await (await api.get("/import/seed-memories")).json()
    assert (third["imported"], third["skipped"]) == (1, len(items))
    stored = await rows(api)
    assert len(stored) == len(items) + 1
    assert all(r["external_id"].startswith("seed:") for r in stored)
    core = [r for r in stored if r["layer"] == 3]
    assert len(core) == 2


async def test_a_seed_reminder_already_past_is_not_set(api: TestClient, tmp_path: Path
                                                        ) -> None:
    """The example's reminder, imported after its date (a fresh install next year), would fire
    in the very first chat: the memory is kept without its alarm, and the report says so."""
    items = json.loads(EXAMPLE_SEED.read_text(encoding="utf-8"))
    [reminder] = [item for item in items if "remind_at" in item]
    (data_dir(tmp_path) / "seed_memories.json").write_text(json.dumps([
        {**reminder, "remind_at": "2026-03-01T09:00:00+08:00"},
        {"content": "提醒用户明年续签护照", "remind_at": "2999-01-01T09:00:00+08:00"}],
        ensure_ascii=False), encoding="utf-8")
    report = await (await api.get("/import/seed-memories")).json()
    assert (report["imported"], report["past_reminders"]) == (2, 1)
    async with cursor(services_of(api.server.app).database.pool) as cur:
        stored = await fetch_all(cur, "SELECT content, remind_at FROM memories ORDER BY id")
        due = await fetch_all(cur, "SELECT id FROM memories WHERE remind_at <= now()")
    assert [(r["content"], r["remind_at"] is None) for r in stored] == [
        (reminder["content"], True), ("提醒用户明年续签护照", False)]
    assert due == []


async def test_seed_txt_one_memory_per_line(api: TestClient, tmp_path: Path) -> None:
    (data_dir(tmp_path) / "seed_memories.txt").write_text("用户叫阿青\n\n用户喜欢猫\n",
                                                           encoding="utf-8")
    report = await (await api.get("/import/seed-memories")).json()
    assert (report["imported"], report["file"]) == (2, "seed_memories.txt")
    assert (await (await api.get("/import/seed-memories")).json())["imported"] == 0


async def test_a_bad_seed_item_is_named_and_nothing_is_written(api: TestClient,
                                                               tmp_path: Path) -> None:
    (data_dir(tmp_path) / "seed_memories.json").write_text(
        json.dumps([{"content": "好的一条"}, {"content": "坏的一条", "importance": 99}]),
        encoding="utf-8")
    response = await api.get("/import/seed-memories")
    assert response.status == 400
    problem = await error_of(response)
    assert "item 1" in problem["message"] and problem["field"] == "importance"
    assert await rows(api) == []
