"""The status page's health lines: the last failed upstream answer (status, model, never the
body), background work per kind with its newest error and retry from the card, and the
embedding provider's state."""

from __future__ import annotations

from typing import Any

from bs4 import BeautifulSoup

from pawwake.db import jobs as jobs_db
from pawwake.db.pool import cursor
from pawwake.jobs import Job
from pawwake.services import services_of
from tests.dashboard_support import logged_in, same_origin
from tests.gateway_support import chat_body


async def status_page(client: Any, path: str = "/dashboard") -> BeautifulSoup:
    response = await client.get(path)
    assert response.status == 200
    return BeautifulSoup(await response.text(), "html.parser")


def line(page: BeautifulSoup, name: str) -> Any:
    found = page.select_one(f"[data-health={name}]")
    assert found is not None, name
    return found


async def test_the_last_upstream_failure_is_shown_without_its_body(make_client: Any,
                                                                  upstream: Any) -> None:
    client = await logged_in(make_client, MEMORY_VECTOR_ENABLED=False)
    page = await status_page(client)
    assert line(page, "upstream")["data-state"] == "ok"
    assert line(page, "database")["data-state"] == "ok"
    assert line(page, "embedding")["data-state"] == "off"

    upstream.reply_error(503, "overloaded; your key sk-upstream-test-key-0123456789")
    response = await client.post("/v1/chat/completions", json=chat_body("你好"))
    assert response.status == 503
    page = await status_page(client)
    upstream_line = line(page, "upstream")
    assert upstream_line["data-state"] == "error"
    text = upstream_line.get_text(" ", strip=True)
    assert "503" in text and "test/model-a" in text
    assert "overloaded" not in page.get_text() and "sk-upstream" not in page.get_text()

    response = await client.post("/v1/chat/completions", json=chat_body("你好"))
    assert response.status == 200
    await response.read()
    assert line(await status_page(client), "upstream")["data-state"] == "warning"


async def failing(job: Job) -> None:
    raise ValueError("the memory model answered nonsense")


async def failed_extraction(app: Any) -> int:
    """A memory extraction job that failed for good (its handler raised on its one attempt),
    as the status page shows it; returns its id."""
    services_of(app).jobs.register("memory_extract", failing)
    async with cursor(services_of(app).database.pool) as cur:
        dead = await jobs_db.enqueue(cur, "memory_extract", {}, max_attempts=1)
    await services_of(app).jobs.run_until_idle()
    return int(dead)


async def test_failing_jobs_per_kind_with_their_error_and_retry_here(make_client: Any) -> None:
    client = await logged_in(make_client, JOB_WORKERS=0, MEMORY_VECTOR_ENABLED=False)
    app = client.server.app
    pool = services_of(app).database.pool
    dead = await failed_extraction(app)
    async with cursor(pool) as cur:
        await jobs_db.enqueue(cur, "memory_embed", {"memory_id": 1})

    page = await status_page(client)
    assert line(page, "jobs")["data-state"] == "error"
    extract = page.select_one("[data-jobs-kind=memory_extract]")
    assert extract["data-state"] == "error"
    assert "nonsense" in extract.select_one("[data-field=error]").get_text()
    assert extract.select_one(f"[data-job-problem='{dead}']") is not None
    embed = page.select_one("[data-jobs-kind=memory_embed]")
    assert embed["data-state"] == "ok"
    assert embed.select_one("[data-kind-count=pending]") is not None

    # Retry from the card comes back to the card, saying what happened.
    form = extract.select_one("[data-action=retry]").find_parent("form")
    response = await client.post(form["action"], data={"back": "status"},
                                 headers=same_origin(client), allow_redirects=False)
    assert response.status == 303
    assert response.headers["Location"] == (f"/dashboard?job_done=retried&job={dead}"
                                            "#status-jobs")
    async with cursor(pool) as cur:
        assert (await jobs_db.get_job(cur, dead))["attempts"] == 0
    page = await status_page(client, response.headers["Location"].split("#")[0])
    notice = page.select_one("#status-jobs [data-notice]")
    assert notice is not None and str(dead) in notice.get_text()


async def test_embedding_line_reports_provider_model_and_progress(make_client: Any) -> None:
    client = await logged_in(make_client, MEMORY_ENABLED=True, MEMORY_VECTOR_ENABLED=True,
                             EMBEDDING_PROVIDER="local", JOB_WORKERS=0)
    embedding = line(await status_page(client), "embedding")
    assert embedding["data-state"] == "ok"
    text = embedding.get_text(" ", strip=True)
    assert "local" in text and "0 / 0" in text
