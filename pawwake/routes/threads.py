"""Partition thread API (/api/partition/*): status, threads, switch, create, rename, delete
and the rolling summary."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiohttp import web

from pawwake.api_error import ApiError
from pawwake.app_faces import CONFIG, database_of, face_of, settings_of
from pawwake.partition import threads as service
from pawwake.partition.threads import session_id_of
from pawwake.routes.api_body import Parser, optional, read_fields
from pawwake.routes.database_required import database_required
from pawwake.routes.json_reply import json_body
from pawwake.settings.entry import SettingError


def _thread_id(name: str) -> Callable[[Any], str]:
    return lambda value: session_id_of(value, name)


SWITCH: dict[str, Parser] = {"thread_id": _thread_id("thread_id")}
CREATE: dict[str, Parser] = {"thread_id": _thread_id("thread_id"),
          "inherit_summary_from": optional(_thread_id("inherit_summary_from"))}
RENAME: dict[str, Parser] = {"old_id": _thread_id("old_id"), "new_id": _thread_id("new_id")}
SUMMARY: dict[str, Parser] = {"thread_id": _thread_id("thread_id"), "summary": service.summary_text}


def _query_thread(request: web.Request) -> str:
    return session_id_of(request.query.get("thread_id"), "thread_id")


@database_required("Partition threads")
async def status(request: web.Request) -> web.StreamResponse:
    return json_body(await service.status(database_of(request),
                                          settings=await settings_of(request)))


@database_required("Partition threads")
async def list_threads(request: web.Request) -> web.StreamResponse:
    return json_body({"threads": await service.list_threads(database_of(request),
                                                            settings=await settings_of(request))})


@database_required("Partition threads")
async def switch(request: web.Request) -> web.StreamResponse:
    body = await read_fields(request, SWITCH, max_bytes=None)
    try:
        thread_id = await service.switch(face_of(request, CONFIG), body["thread_id"])
    except SettingError as exc:  # the active thread is the setting PARTITION_SESSION_ID
        raise ApiError("invalid_thread_id", str(exc)) from exc
    return json_body({"active_thread": thread_id})


@database_required("Partition threads")
async def create(request: web.Request) -> web.StreamResponse:
    body = await read_fields(request, CREATE, {"inherit_summary_from": None}, max_bytes=None)
    return json_body(await service.create(database_of(request), body["thread_id"],
                                          body["inherit_summary_from"]), status=201)


@database_required("Partition threads")
async def rename(request: web.Request) -> web.StreamResponse:
    body = await read_fields(request, RENAME, max_bytes=None)
    return json_body(await service.rename(database_of(request), face_of(request, CONFIG), body["old_id"], body["new_id"],
                                          settings=await settings_of(request)))


@database_required("Partition threads")
async def delete(request: web.Request) -> web.StreamResponse:
    return json_body(await service.delete(database_of(request), request.match_info["thread_id"],
                                          settings=await settings_of(request)))


@database_required("Partition threads")
async def get_summary(request: web.Request) -> web.StreamResponse:
    return json_body(await service.get_summary(database_of(request), _query_thread(request)))


@database_required("Partition threads")
async def put_summary(request: web.Request) -> web.StreamResponse:
    body = await read_fields(request, SUMMARY, max_bytes=None)
    return json_body(await service.put_summary(database_of(request), body["thread_id"],
                                               body["summary"]))


@database_required("Partition threads")
async def clear_summary(request: web.Request) -> web.StreamResponse:
    return json_body(await service.clear_summary(database_of(request), _query_thread(request)))


def setup(app: web.Application) -> None:
    add = app.router
    add.add_get("/partition/status", status, name="partition_status")
    add.add_get("/partition/threads", list_threads, name="partition_threads")
    add.add_post("/partition/switch", switch, name="partition_switch")
    add.add_post("/partition/thread", create, name="partition_thread_create")
    add.add_put("/partition/thread/rename", rename, name="partition_thread_rename")
    add.add_delete("/partition/thread/{thread_id}", delete, name="partition_thread")
    add.add_get("/partition/summary", get_summary, name="partition_summary")
    add.add_put("/partition/summary", put_summary, name="partition_summary_put")
    add.add_delete("/partition/summary", clear_summary, name="partition_summary_delete")
