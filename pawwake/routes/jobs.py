"""/api/jobs: background jobs by status, and retry or discard one.

``GET /api/jobs?status=attention|retrying|dead|failed|pending|running|done|discarded|all``
(``kind``, ``limit`` up to 200, ``before_id`` to page), ``GET /api/jobs/{id}``,
``POST /api/jobs/{id}/retry`` (runs it now with a fresh set of attempts) and
``POST /api/jobs/{id}/discard`` (kept, never run again). 404 for an unknown job, 409 when its
state does not allow the action (running, done, already discarded, an equal job queued).
"""

from __future__ import annotations

from aiohttp import web

from pawwake import job_admin
from pawwake.api_error import ApiError
from pawwake.app_faces import JOBS, database_of, face_of
from pawwake.routes.database_required import database_required
from pawwake.routes.json_reply import json_body
from pawwake.text.numbers import whole_number

FEATURE = "Background jobs"


def _job_id(request: web.Request) -> int:
    job_id = whole_number(request.match_info["job_id"])
    if job_id is None:
        raise ApiError("invalid_job_id", "A job id is a positive integer.")
    return job_id


def _query_int(request: web.Request, name: str, default: int | None) -> int | None:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return default
    number = whole_number(raw)
    if number is None:
        raise ApiError(f"invalid_{name}", f"'{name}' must be a positive integer.")
    return number


@database_required(FEATURE)
async def list_jobs(request: web.Request) -> web.StreamResponse:
    status = job_admin.status_filter(request.query.get("status"))
    limit = _query_int(request, "limit", 50) or 1
    jobs = await job_admin.list_jobs(database_of(request), status, kind=request.query.get("kind"),
                                     limit=limit,
                                     before_id=_query_int(request, "before_id", None))
    return json_body({"jobs": jobs, "status": status or "all"})


@database_required(FEATURE)
async def get_job(request: web.Request) -> web.StreamResponse:
    return json_body(await job_admin.get_job(database_of(request), _job_id(request)))


@database_required(FEATURE)
async def retry(request: web.Request) -> web.StreamResponse:
    return json_body(await job_admin.retry(face_of(request, JOBS), _job_id(request)))


@database_required(FEATURE)
async def discard(request: web.Request) -> web.StreamResponse:
    return json_body(await job_admin.discard(face_of(request, JOBS), _job_id(request)))


def setup(app: web.Application) -> None:
    add = app.router
    add.add_get("/jobs", list_jobs, name="jobs")
    add.add_get("/jobs/{job_id}", get_job, name="job")
    add.add_post("/jobs/{job_id}/retry", retry, name="job_retry")
    add.add_post("/jobs/{job_id}/discard", discard, name="job_discard")
