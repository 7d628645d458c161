"""The import page: plain text (one memory per line, optional scoring) and a JSON backup
restore that always shows a dry-run preview before the explicit confirmation."""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import web
from multidict import MultiDictProxy

from pawwake.app_faces import MEMORY_LEARNING, MEMORY_WRITES, face_of, settings_of
from pawwake.dashboard.i18n import request_language, translate
from pawwake.dashboard.refusals import PageRefusal
from pawwake.dashboard.render import render
from pawwake.db.errors import DatabaseUnavailable
from pawwake.memory import backup, text_import
from pawwake.memory.backup_format import BackupInvalid
from pawwake.memory.fields import MAX_CONTENT_CHARS, FieldError
from pawwake.memory.store import MemoryConflict
from pawwake.text.json_input import parse_json

log = logging.getLogger(__name__)

PAGE = "dashboard/import.html"
TEXT_CARD = "partials/_memory_import_text.html"
BACKUP_CARD = "partials/_memory_import_backup.html"
PREVIEW_CONTENT_CHARS = 80
CONFLICT_KEYS = {reason: f"import.conflict_{reason}"
                 for reason in ("differs_from_existing", "external_id_in_use")}


def _uploaded_text(form: MultiDictProxy[Any], file_field: str, text_field: str) -> str:
    """The chosen file's text when a file was sent, else the pasted text (UTF-8 only)."""
    upload = form.get(file_field)
    if isinstance(upload, web.FileField):
        data = upload.file.read()
        if data:
            try:
                return data.decode("utf-8-sig")
            except UnicodeDecodeError:
                raise PageRefusal("import.not_utf8") from None
    pasted = form.get(text_field)
    return pasted.replace("\r\n", "\n") if isinstance(pasted, str) else ""


def _card(**values: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"report": None, "error": None, "problems": [], "preview": None,
                            "done": None, "skip_scoring": False, "text": ""}
    return {**base, **values}


async def import_page(request: web.Request) -> web.Response:
    return render(request, PAGE, {"text_card": _card(), "backup_card": _card()})


def _answer(request: web.Request, *, text_card: dict[str, Any] | None = None,
            backup_card: dict[str, Any] | None = None, status: int = 200) -> web.Response:
    """The card that changed (htmx) or the whole page with it (plain form)."""
    context = {"text_card": text_card or _card(), "backup_card": backup_card or _card()}
    fragment = TEXT_CARD if text_card is not None else BACKUP_CARD
    return render(request, PAGE, context, fragment=fragment, status=status)


async def import_text(request: web.Request) -> web.Response:
    """Import one memory per line; the report says what was imported, skipped and scored. A
    refused import gives the pasted text back in the form, so a long paste is never lost."""
    lang = request_language(request)
    form = await request.post()
    skip = form.get("skip_scoring") in ("1", "on", "true")
    pasted = form.get("text")
    kept = pasted if isinstance(pasted, str) else ""

    def refused(key: str, status: int = 400, **values: Any) -> web.Response:
        return _answer(request, text_card=_card(error=translate(lang, key, **values),
                                                skip_scoring=skip, text=kept), status=status)

    try:
        text = _uploaded_text(form, "file", "text")
    except PageRefusal as exc:
        return refused(exc.key)
    if not text.strip():
        return refused("import.text_empty")
    try:
        report = await text_import.import_text(face_of(request, MEMORY_LEARNING), text, skip_scoring=skip,
                                               settings=await settings_of(request))
    except text_import.LineTooLong as exc:
        return refused("import.line_too_long", line=exc.line, most=MAX_CONTENT_CHARS)
    except FieldError:
        return refused("import.too_many_lines", most=text_import.MAX_LINES)
    except DatabaseUnavailable:
        return refused("memories.no_database", status=503)
    return _answer(request, text_card=_card(report=report, skip_scoring=skip))


def _parse_backup(raw: str) -> Any:
    if not raw.strip():
        raise PageRefusal("import.backup_empty")
    try:
        return parse_json(raw)  # too deep counts as "not a backup file" too
    except ValueError:
        raise PageRefusal("import.backup_not_json") from None


def _positions(data: Any) -> dict[Any, tuple[int, str]]:
    """backup id -> (position in the file, start of its content), to explain conflicts."""
    found: dict[Any, tuple[int, str]] = {}
    for number, item in enumerate(data.get("memories", []), 1):
        if isinstance(item, dict):
            content = str(item.get("content", ""))
            if len(content) > PREVIEW_CONTENT_CHARS:
                content = content[:PREVIEW_CONTENT_CHARS] + "…"
            found.setdefault(item.get("backup_id"), (number, content))
    return found


def _report_view(report: dict[str, Any], data: Any) -> dict[str, Any]:
    """The import report with conflicts named by their place in the file, never by row id."""
    where = _positions(data)
    conflicts = []
    for item in report.get("conflict_details", []):
        number, content = where.get(item.get("backup_id"), (None, ""))
        reason = item["reason"]
        conflicts.append({"position": number, "content": content, "fields": item.get("fields", []),
                          "reason_key": CONFLICT_KEYS.get(reason, "import.conflict_other")})
    return {"imported": report["imported"], "skipped": report["skipped"],
            "conflicts": report["conflicts"], "conflict_list": conflicts,
            "same_database": report.get("same_database", False),
            "schema_version": report.get("schema_version")}


async def backup_step(request: web.Request) -> web.Response:
    """``step=preview`` runs a dry run; ``step=import`` (from the preview) imports for real."""
    lang = request_language(request)
    form = await request.post()
    step = form.get("step")
    if step not in ("preview", "import"):
        return _answer(request, backup_card=_card(error=translate(lang, "memories.bad_action")),
                       status=400)
    try:
        raw = _uploaded_text(form, "file", "backup")
        data = _parse_backup(raw)
        report = await backup.import_backup(face_of(request, MEMORY_WRITES), data, dry_run=step == "preview")
    except PageRefusal as exc:
        return _answer(request, backup_card=_card(error=translate(lang, exc.key)), status=400)
    except BackupInvalid as exc:
        return _answer(request, backup_card=_card(error=translate(lang, "import.backup_invalid"),
                                                  problems=exc.problems), status=400)
    except MemoryConflict:
        return _answer(request, backup_card=_card(error=translate(lang, "import.busy")),
                       status=409)
    except DatabaseUnavailable:
        return _answer(request, backup_card=_card(error=translate(lang, "memories.no_database")),
                       status=503)
    shown = _report_view(report, data)
    if step == "preview":
        return _answer(request, backup_card=_card(preview={**shown, "raw": raw}))
    log.info("backup restored from the dashboard: %s imported", shown["imported"])
    return _answer(request, backup_card=_card(done=shown))


def setup(dashboard: web.Application) -> None:
    add = dashboard.router
    add.add_get("/import", import_page, name="memories_import")
    add.add_post("/import/text", import_text, name="memories_import_text")
    add.add_post("/import/backup", backup_step, name="memories_import_backup")

