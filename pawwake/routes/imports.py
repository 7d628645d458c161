"""Memory import and export: plain text, JSON backup (with link repair), operator seed file."""

from __future__ import annotations

import functools
import json
import logging
from typing import Any

from aiohttp import BodyPartReader, web

from pawwake.api_error import ApiError
from pawwake.app_faces import (
    CONFIG,
    MEMORY_LEARNING,
    MEMORY_WRITES,
    database_of,
    face_of,
    settings_of,
)
from pawwake.local_time import file_stamp, zone_of
from pawwake.memory import backup, seed, text_import
from pawwake.memory.fields import (
    FieldError,
    parse_bool,
    parse_query_bool,
)
from pawwake.routes.api_body import Parser, read_fields, read_json
from pawwake.text.json_input import JsonTooDeep, parse_json

log = logging.getLogger(__name__)

_TRUE_FORM_VALUES = ("1", "true", "on", "yes")


TEXT_IMPORT: dict[str, Parser] = {"text": lambda value: value,  # checked below, as a form's file is
               "skip_scoring": functools.partial(parse_bool, field="skip_scoring")}


def _decode(data: bytes, name: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise FieldError(name, "The file is not UTF-8 text; save it as UTF-8 and try again.",
                         "invalid_encoding") from None


async def _form(request: web.Request) -> dict[str, str]:
    """The fields of a multipart upload, files decoded as UTF-8 text."""
    fields: dict[str, str] = {}
    try:
        reader = await request.multipart()
        while (part := await reader.next()) is not None:
            if not isinstance(part, BodyPartReader) or not part.name:
                continue
            fields[part.name] = _decode(await part.read(decode=True), part.name)
    except FieldError:
        raise
    except (ValueError, KeyError, AssertionError) as exc:  # no boundary, a broken body
        raise FieldError(None, "The multipart body could not be read; send a form with a "
                         "boundary, or JSON.", "invalid_multipart") from exc
    return fields


def _is_multipart(request: web.Request) -> bool:
    return request.content_type.startswith("multipart/")


async def import_text(request: web.Request) -> web.Response:
    """JSON ``{text, skip_scoring}`` or a multipart form with a ``file`` (and ``skip_scoring``)."""
    if _is_multipart(request):
        form = await _form(request)
        text = form.get("file", form.get("text"))
        skip = form.get("skip_scoring", "").strip().lower() in _TRUE_FORM_VALUES
    else:
        body = await read_fields(request, TEXT_IMPORT, {"skip_scoring": False}, max_bytes=None)
        text, skip = body["text"], body["skip_scoring"]
    if not isinstance(text, str):
        raise FieldError("text", "Send the lines as 'text' (JSON) or a 'file' (form upload).")
    report = await text_import.import_text(face_of(request, MEMORY_LEARNING), text, skip_scoring=skip,
                                           settings=await settings_of(request))
    return web.json_response(report)


async def export(request: web.Request) -> web.Response:
    document = await backup.export_backup(database_of(request))
    stamp = file_stamp(zone_of(face_of(request, CONFIG).current()))
    return web.json_response(document, dumps=_dumps, headers={
        "Content-Disposition": f'attachment; filename="pawwake-memories-{stamp}.json"'})


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


async def repair_links(request: web.Request) -> web.Response:
    return web.json_response(await backup.repair_links(database_of(request)))


async def import_backup(request: web.Request) -> web.Response:
    """A backup as the JSON body (or a multipart ``file``); ``?dry_run=true`` only previews."""
    dry_run = parse_query_bool(request.query.get("dry_run"), "dry_run", False)
    if _is_multipart(request):
        raw = (await _form(request)).get("file")
        if raw is None:
            raise FieldError("file", "Upload the backup as the form field 'file'.")
        try:
            data = parse_json(raw)
        except JsonTooDeep as exc:
            raise FieldError("file", str(exc), "json_too_deep") from None
        except ValueError:
            raise FieldError("file", "The file is not valid JSON.", "invalid_json") from None
    else:
        data = await read_json(request, max_bytes=None)
    report = await backup.import_backup(face_of(request, MEMORY_WRITES), data, dry_run=dry_run)
    return web.json_response(report)


async def seed_memories(request: web.Request) -> web.Response:
    try:
        report = await seed.import_seed(face_of(request, MEMORY_WRITES))
    except seed.NoSeedFile as exc:
        raise ApiError("seed_file_not_found", str(exc), status=404) from exc
    return web.json_response(report)


def setup(app: web.Application) -> None:
    add = app.router
    add.add_post("/memories/import/text", import_text, name="api_memories_import_text")
    add.add_post("/memories/import", import_backup, name="api_memories_import")
    add.add_get("/memories/export", export, name="api_memories_export")
    add.add_post("/memories/repair-links", repair_links, name="api_memories_repair_links")


def setup_seed(app: web.Application) -> None:
    """GET /import/seed-memories, on the /import sub-app."""
    app.router.add_get("/seed-memories", seed_memories, name="import_seed_memories")
