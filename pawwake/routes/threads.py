"""Partition thread API (/api/partition/*): status, threads, switch, create, rename, delete
and the rolling summary."""

from __future__ import annotations

from aiohttp import web

from pawwake.chat import threads as service
from pawwake.chat.threads import session_id_of
from pawwake.routes.service_errors import guarded, json_body, read_object
from pawwake.services import database_of, services_of, settings_of


def _query_thread(request: web.Request) -> str:
    return session_id_of(request.query.get("thread_id"), "thread_id")


@guarded("Partition threads", setting_error_code="invalid_thread_id")
async def status(request: web.Request) -> web.StreamResponse:
    return json_body(await service.status(database_of(request),
                                          settings=await settings_of(request)))


@guarded("Partition threads", setting_error_code="invalid_thread_id")
async def list_threads(request: web.Request) -> web.StreamResponse:
    return json_body({"threads": await service.list_threads(database_of(request),
                                                            settings=await settings_of(request))})


@guarded("Partition threads", setting_error_code="invalid_thread_id")
async def switch(request: web.Request) -> web.StreamResponse:
    body = await read_object(request, {"thread_id"})
    thread_id = await service.switch(services_of(request).config,
                                     session_id_of(body.get("thread_id"),
                                                                "thread_id"))
    return json_body({"active_thread": thread_id})


@guarded("Partition threads", setting_error_code="invalid_thread_id")
async def create(request: web.Request) -> web.StreamResponse:
    body = await read_object(request, {"thread_id", "inherit_summary_from"})
    thread_id = session_id_of(body.get("thread_id"), "thread_id")
    source = body.get("inherit_summary_from")
    if source is not None:
        source = session_id_of(source, "inherit_summary_from")
    return json_body(await service.create(database_of(request), thread_id, source), status=201)


@guarded("Partition threads", setting_error_code="invalid_thread_id")
async def rename(request: web.Request) -> web.StreamResponse:
    body = await read_object(request, {"old_id", "new_id"})
    old_id = session_id_of(body.get("old_id"), "old_id")
    new_id = session_id_of(body.get("new_id"), "new_id")
    return json_body(await service.rename(services_of(request), old_id, new_id,
                                          settings=await settings_of(request)))


@guarded("Partition threads", setting_error_code="invalid_thread_id")
async def delete(request: web.Request) -> web.StreamResponse:
    return json_body(await service.delete(database_of(request), request.match_info["thread_id"],
                                          settings=await settings_of(request)))


@guarded("Partition threads", setting_error_code="invalid_thread_id")
async def get_summary(request: web.Request) -> web.StreamResponse:
    return json_body(await service.get_summary(database_of(request), _query_thread(request)))


@guarded("Partition threads", setting_error_code="invalid_thread_id")
async def put_summary(request: web.Request) -> web.StreamResponse:
    body = await read_object(request, {"thread_id", "summary"})
    thread_id = session_id_of(body.get("thread_id"), "thread_id")
    summary = service.summary_text(body.get("summary"))
    return json_body(await service.put_summary(database_of(request), thread_id, summary))


@guarded("Partition threads", setting_error_code="invalid_thread_id")
async def clear_summary(request: web.Request) -> web.StreamResponse:
    return json_body(await service.clear_summary(database_of(request), _query_thread(request)))


def setup(app: web.Application) -> None:
    add = app.router
    add.add_get("/api/partition/status", status, name="partition_status")
    add.add_get("/api/partition/threads", list_threads, name="partition_threads")
    add.add_post("/api/partition/switch", switch, name="partition_switch")
    add.add_post("/api/partition/thread", create, name="partition_thread_create")
    add.add_put("/api/partition/thread/rename", rename, name="partition_thread_rename")
    add.add_delete("/api/partition/thread/{thread_id}", delete, name="partition_thread")
    add.add_get("/api/partition/summary", get_summary, name="partition_summary")
    add.add_put("/api/partition/summary", put_summary, name="partition_summary_put")
    add.add_delete("/api/partition/summary", clear_summary, name="partition_summary_delete")
