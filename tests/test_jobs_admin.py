"""Failed and retrying jobs are visible and actionable: /api/jobs, the dashboard's jobs page
(retry, discard) and the status page, down to an extraction that dead-letters and is
retried from the dashboard."""

from __future__ import annotations

import json
from typing import Any

import pytest
from bs4 import BeautifulSoup

from pawwake.conversations.extraction_schedule import EXTRACT_KIND, schedule_extraction
from pawwake.db import jobs as jobs_db
from pawwake.db.conversations import NewMessage, insert_messages
from pawwake.db.pool import cursor, execute, fetch_all, transaction
from pawwake.jobs import Job
from pawwake.services import services_of
from tests.dashboard_support import dashboard_client, htmx, login, same_origin
from tests.fake_upstream import Reply, completion_body


class Outcomes:
    """Handlers whose result the test decides: fail (with a model named) or succeed."""

    def __init__(self) -> None:
        self.failing = True

    async def handler(self, job: Job) -> str:
        job.model = "test/memory"
        if self.failing:
            raise ValueError("the model answered nonsense")
        return "ok"


@pytest.fixture
async def dash(make_client: Any) -> Any:
    client = await dashboard_client(make_client, JOB_WORKERS=0, MEMORY_ENABLED=True,
                                    MEMORY_MODEL="test/memory", MEMORY_EXTRACT_INTERVAL=1)
    await login(client)
    return client


def pool_of(client: Any) -> Any:
    return services_of(client.server.app).database.pool


async def run_jobs(client: Any) -> None:
    await services_of(client.server.app).jobs.run_until_idle()


async def make_due(client: Any) -> None:
    async with cursor(pool_of(client)) as cur:
        await execute(cur, "UPDATE jobs SET run_after = now() WHERE status = 'pending'")


async def jobs_in_every_state(client: Any, outcomes: Outcomes) -> dict[str, int]:
    """One dead, one retrying, one done and one queued job (kinds named after them)."""
    runner = services_of(client.server.app).jobs
    for kind in ("dead", "retrying", "done", "queued"):
        runner.register(kind, outcomes.handler)
    pool = pool_of(client)
    async with cursor(pool) as cur:
        ids = {"dead": await jobs_db.enqueue(cur, "dead", {}, max_attempts=1),
               "retrying": await jobs_db.enqueue(cur, "retrying", {}, max_attempts=5)}
    await run_jobs(client)
    outcomes.failing = False
    async with cursor(pool) as cur:
        ids["done"] = await jobs_db.enqueue(cur, "done", {})
    await run_jobs(client)
    async with cursor(pool) as cur:
        ids["queued"] = await jobs_db.enqueue(cur, "queued", {}, delay_seconds=3600)
    return ids


async def listed(client: Any, status: str | None = None) -> list[dict[str, Any]]:
    query = f"?status={status}" if status else ""
    response = await client.get(f"/api/jobs{query}")
    assert response.status == 200, await response.text()
    return (await response.json())["jobs"]


async def test_the_api_lists_jobs_by_status(dash: Any) -> None:
    ids = await jobs_in_every_state(dash, Outcomes())
    assert [j["id"] for j in await listed(dash, "dead")] == [ids["dead"]]
    assert [j["id"] for j in await listed(dash, "retrying")] == [ids["retrying"]]
    assert {j["id"] for j in await listed(dash, "attention")} == {ids["dead"], ids["retrying"]}
    assert [j["id"] for j in await listed(dash, "pending")] == [ids["queued"]]
    assert [j["id"] for j in await listed(dash, "done")] == [ids["done"]]
    assert len(await listed(dash)) == 4
    dead = (await listed(dash, "dead"))[0]
    assert dead["kind"] == "dead" and dead["status"] == "dead"
    assert (dead["attempts"], dead["max_attempts"]) == (1, 1)
    assert dead["last_error"] == "ValueError: the model answered nonsense"
    assert dead["model"] == "test/memory" and dead["updated_at"]
    retrying = (await listed(dash, "retrying"))[0]
    assert retrying["next_try_at"] > retrying["updated_at"]

    one = await dash.get(f"/api/jobs/{ids['dead']}")
    assert one.status == 200 and (await one.json())["id"] == ids["dead"]
    for path, status, code in [("/api/jobs?status=bogus", 400, "invalid_status"),
                               ("/api/jobs?limit=x", 400, "invalid_limit"),
                               ("/api/jobs/999999", 404, "not_found"),
                               ("/api/jobs/abc", 400, "invalid_job_id")]:
        response = await dash.get(path)
        assert response.status == status, path
        assert (await response.json())["error"]["code"] == code


async def test_the_api_retries_and_discards_with_real_statuses(dash: Any) -> None:
    outcomes = Outcomes()
    ids = await jobs_in_every_state(dash, outcomes)
    pool = pool_of(dash)

    retried = await dash.post(f"/api/jobs/{ids['dead']}/retry")
    assert retried.status == 200
    body = await retried.json()
    assert body["attempts"] == 0 and body["status"] in ("pending", "retrying")
    await run_jobs(dash)  # due now, and this time the handler succeeds
    async with cursor(pool) as cur:
        assert (await jobs_db.get_job(cur, ids["dead"]))["status"] == "done"

    for job_id, action, status in [(ids["done"], "retry", 409), (ids["done"], "discard", 409),
                                   (999999, "retry", 404), (999999, "discard", 404)]:
        response = await dash.post(f"/api/jobs/{job_id}/{action}")
        assert response.status == status, (job_id, action)

    discarded = await dash.post(f"/api/jobs/{ids['retrying']}/discard")
    assert discarded.status == 200 and (await discarded.json())["status"] == "discarded"
    assert (await dash.post(f"/api/jobs/{ids['retrying']}/discard")).status == 409
    async with cursor(pool) as cur:
        await execute(cur, "UPDATE jobs SET run_after = now() WHERE id = %s", (ids["retrying"],))
    assert await services_of(dash.server.app).jobs.run_until_idle() == 0  # discarded never runs
    async with cursor(pool) as cur:
        assert (await jobs_db.get_job(cur, ids["retrying"]))["status"] == "discarded"

    # A running job can be neither retried nor discarded.
    async with cursor(pool) as cur:
        await execute(cur, "UPDATE jobs SET run_after = now() WHERE id = %s", (ids["queued"],))
        assert await jobs_db.claim_next(cur, ["queued"], 60) is not None
    assert (await dash.post(f"/api/jobs/{ids['queued']}/retry")).status == 409
    assert (await dash.post(f"/api/jobs/{ids['queued']}/discard")).status == 409


async def test_retrying_a_dead_job_that_is_queued_again_is_a_conflict(dash: Any) -> None:
    services_of(dash.server.app).jobs.register("keyed", Outcomes().handler)
    pool = pool_of(dash)
    async with cursor(pool) as cur:
        dead = await jobs_db.enqueue(cur, "keyed", {}, dedupe_key="k", max_attempts=1)
    await run_jobs(dash)
    async with cursor(pool) as cur:
        twin = await jobs_db.enqueue(cur, "keyed", {}, dedupe_key="k", delay_seconds=3600)
    assert twin is not None
    response = await dash.post(f"/api/jobs/{dead}/retry")
    assert response.status == 409
    assert str(twin) in (await response.json())["error"]["message"]


async def page(client: Any, path: str = "/dashboard/jobs") -> BeautifulSoup:
    response = await client.get(path)
    assert response.status == 200, await response.text()
    return BeautifulSoup(await response.text(), "html.parser")


async def test_the_dashboard_shows_failures_and_retries_and_discards_them(dash: Any) -> None:
    outcomes = Outcomes()
    ids = await jobs_in_every_state(dash, outcomes)
    soup = await page(dash)
    rows = {int(tr["data-job"]): tr for tr in soup.select("tr[data-job]")}
    assert set(rows) == {ids["dead"], ids["retrying"]}  # the default view: needs attention
    dead = rows[ids["dead"]]
    assert "dead" in dead.select_one("[data-field=kind]").get_text()
    assert dead.select_one("[data-field=attempts]").get_text(strip=True) == "1 / 1"
    assert "the model answered nonsense" in dead.select_one("[data-field=error]").get_text()
    assert dead.select_one("[data-field=model]").get_text(strip=True) == "test/memory"
    assert dead.select_one("[data-field=time]").get_text(strip=True)
    assert dead.select_one("button[data-action=retry]") is not None
    everything = await page(dash, "/dashboard/jobs?status=all")
    assert len(everything.select("tr[data-job]")) == 4

    # A write from another site is refused and changes nothing.
    refused = await dash.post(f"/dashboard/jobs/{ids['dead']}/retry", data={},
                              headers={"Origin": "https://evil.example"})
    assert refused.status == 403
    async with cursor(pool_of(dash)) as cur:
        assert (await jobs_db.get_job(cur, ids["dead"]))["status"] == "dead"

    # htmx retry: the region comes back with a notice, the job is queued to run now.
    swapped = await dash.post(f"/dashboard/jobs/{ids['dead']}/retry",
                              data={"status": "attention"}, headers=htmx(dash))
    assert swapped.status == 200
    region = BeautifulSoup(await swapped.text(), "html.parser")
    assert region.select_one("#jobs-region") is not None and region.select_one("[data-notice]")
    assert region.select_one("html") is None  # a fragment, not a page
    async with cursor(pool_of(dash)) as cur:
        assert (await jobs_db.get_job(cur, ids["dead"]))["attempts"] == 0

    # A plain form discard posts and comes back to the page with a notice.
    plain = await dash.post(f"/dashboard/jobs/{ids['retrying']}/discard",
                            data={"status": "attention"}, headers=same_origin(dash),
                            allow_redirects=False)
    assert plain.status == 303
    assert "done=discarded" in plain.headers["Location"]
    back = await page(dash, plain.headers["Location"])
    assert back.select_one("[data-notice]") is not None
    async with cursor(pool_of(dash)) as cur:
        assert (await jobs_db.get_job(cur, ids["retrying"]))["status"] == "discarded"

    missing = await dash.post("/dashboard/jobs/999999/retry", data={}, headers=htmx(dash))
    assert missing.status == 404
    conflict = await dash.post(f"/dashboard/jobs/{ids['done']}/discard", data={},
                               headers=htmx(dash))
    assert conflict.status == 409


async def test_the_english_page_speaks_english(dash: Any) -> None:
    await jobs_in_every_state(dash, Outcomes())
    dash.session.cookie_jar.update_cookies({"pawwake_lang": "en"})
    soup = await page(dash)
    assert soup.select_one("h1").get_text(strip=True) == "Background jobs"
    assert "Stopped retrying" in soup.get_text()


async def store_round(client: Any, user_text: str, reply_text: str) -> int | None:
    app = client.server.app
    settings = await services_of(app).config.fresh()
    async with transaction(pool_of(client)) as cur:
        await insert_messages(cur, "chat-1", [NewMessage("user", user_text),
                                              NewMessage("assistant", reply_text)])
        return await schedule_extraction(cur, settings, "chat-1")


async def status_page(client: Any) -> BeautifulSoup:
    return await page(client, "/dashboard")


async def test_an_extraction_that_dead_letters_is_shown_and_retried_from_the_dashboard(
        dash: Any, upstream: Any) -> None:
    healthy = await status_page(dash)
    assert healthy.select_one("[data-jobs-health]")["data-jobs-health"] == "ok"
    assert healthy.select_one("[data-memory-failing]") is None

    job_id = await store_round(dash, "我对花生过敏", "记住了，会注意的")
    assert job_id is not None
    async with cursor(pool_of(dash)) as cur:
        await execute(cur, "UPDATE jobs SET max_attempts = 2 WHERE id = %s", (job_id,))
    usage = {"prompt_tokens": 500, "completion_tokens": 20, "total_tokens": 520}
    for _ in range(2):  # a memory model that does not answer JSON
        upstream.queue(Reply(body=completion_body("我觉得用户对花生过敏。", usage=usage)))
        await run_jobs(dash)
        await make_due(dash)
    async with cursor(pool_of(dash)) as cur:
        job = await jobs_db.get_job(cur, job_id)
    assert job["status"] == "dead" and "unusable" in job["last_error"]
    assert job["model"] == "test/memory"
    async with cursor(pool_of(dash)) as cur:
        booked = await fetch_all(cur, "SELECT total_tokens FROM token_usage"
                                      " WHERE usage_type = 'extract'")
    assert [r["total_tokens"] for r in booked] == [520, 520]

    failing = await status_page(dash)
    assert failing.select_one("[data-jobs-health]")["data-jobs-health"] == "problems"
    assert failing.select_one("[data-jobs-count=dead]") is not None
    assert failing.select_one(f"[data-jobs-kind={EXTRACT_KIND}]") is not None
    assert failing.select_one("[data-memory-failing]") is not None

    response = await dash.post(f"/dashboard/jobs/{job_id}/retry", data={},
                               headers=htmx(dash))
    assert response.status == 200
    answer = {"memories": [{"content": "用户对花生过敏", "importance": 9, "action": "new"}]}
    upstream.queue(Reply(body=completion_body(json.dumps(answer, ensure_ascii=False))))
    await run_jobs(dash)
    async with cursor(pool_of(dash)) as cur:
        assert (await jobs_db.get_job(cur, job_id))["status"] == "done"
        stored = await fetch_all(cur, "SELECT content FROM memories")
    assert [r["content"] for r in stored] == ["用户对花生过敏"]
    recovered = await status_page(dash)
    assert recovered.select_one("[data-jobs-health]")["data-jobs-health"] == "ok"
