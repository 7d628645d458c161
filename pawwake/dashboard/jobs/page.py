"""The background jobs page: jobs by status (kind, attempts, last error, model, time) with
retry and discard. htmx swaps the list in place; without script the forms post and come
back to the page with a notice."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from pawwake import job_admin
from pawwake.app_faces import DATABASE, JOBS, database_of, face_of
from pawwake.dashboard.i18n import request_language, translate
from pawwake.dashboard.refusals import PageRefusal
from pawwake.dashboard.render import is_htmx, render
from pawwake.text.numbers import whole_number

TEMPLATE = "dashboard/jobs.html"
REGION = "partials/_jobs_region.html"
DEFAULT_FILTER = "attention"
PAGE_SIZE = 100
ACTIONS = {"retry": (job_admin.retry, "retried"), "discard": (job_admin.discard, "discarded")}


def _filter(value: Any) -> str:
    chosen = str(value or DEFAULT_FILTER)
    return chosen if chosen in job_admin.STATUS_FILTERS else DEFAULT_FILTER


async def _region(request: web.Request, status: str, notice: str | None) -> dict[str, Any]:
    on = face_of(request, DATABASE) is not None
    jobs = (await job_admin.list_jobs(database_of(request), None if status == "all" else status,
                                      limit=PAGE_SIZE) if on else [])
    return {"jobs": jobs, "status": status, "filters": job_admin.STATUS_FILTERS,
            "notice": notice, "database_on": on}


async def jobs_page(request: web.Request) -> web.Response:
    status = _filter(request.query.get("status"))
    done = request.query.get("done", "")
    notice = None
    if done in {outcome for _, outcome in ACTIONS.values()} \
            and whole_number(request.query.get("id")) is not None:
        notice = translate(request_language(request), f"jobs_done.{done}",
                           id=request.query["id"])
    return render(request, TEMPLATE, await _region(request, status, notice), fragment=REGION)


async def job_action(request: web.Request) -> web.StreamResponse:
    """Retry or discard one job, then show the list again (refusals: 404, 409)."""
    lang = request_language(request)
    form = await request.post()
    status = _filter(form.get("status"))
    raw_id, action = request.match_info["job_id"], request.match_info["action"]
    if action not in ACTIONS:
        raise web.HTTPNotFound()
    job_id = whole_number(raw_id)
    if job_id is None:
        raise PageRefusal("jobs.error_invalid")
    if face_of(request, DATABASE) is None:
        raise PageRefusal("jobs.no_database", 503)
    act, outcome = ACTIONS[action]
    job = await act(face_of(request, JOBS), job_id)
    if form.get("back") == "status":  # from the status page's jobs card: back to that card
        query = {"job_done": outcome, "job": str(job["id"])}
        raise web.HTTPSeeOther(str(request.app.router["status"].url_for().with_query(query))
                               + "#status-jobs")
    if is_htmx(request):
        notice = translate(lang, f"jobs_done.{outcome}", id=job["id"])
        return render(request, REGION, await _region(request, status, notice))
    query = {"status": status, "done": outcome, "id": str(job["id"])}
    raise web.HTTPSeeOther(str(request.app.router["jobs"].url_for().with_query(query)))


def setup(dashboard: web.Application) -> None:
    dashboard.router.add_get("/jobs", jobs_page, name="jobs")
    dashboard.router.add_post(r"/jobs/{job_id}/{action}", job_action, name="jobs_action")
