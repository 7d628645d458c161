"""The try-it page: pick a session and model, send a message through the gateway's own
pipeline, watch the reply stream in and see exactly what the gateway added.

The browser's script posts the form with ``Accept: text/event-stream`` and reads this page's
own event stream (same origin, dashboard login): ``injected`` (the panel, rendered here),
``delta`` (reply text), then ``done`` or ``failed``. Without script the form posts normally and
the page comes back with the whole reply and the panel.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import aiohttp_jinja2
from aiohttp import web

from pawwake.app_faces import DATABASE, RECALL, TRIAL, face_of, settings_of
from pawwake.chat.prepared import ChatRejected
from pawwake.chat.sessions import MAX_SESSION_ID
from pawwake.conversations import manage as service
from pawwake.dashboard.i18n import request_language, translate
from pawwake.dashboard.refusals import PageRefusal
from pawwake.dashboard.render import base_context, render
from pawwake.partition.step import active_thread
from pawwake.relay.trial import trial_chat
from pawwake.text.messages import ChatMessage

log = logging.getLogger(__name__)

TEMPLATE = "dashboard/tryit.html"
PANEL = "partials/_tryit_injected.html"
DEFAULT_SESSION = "dashboard-try"
MAX_MESSAGE_CHARS = 20_000
MAX_HISTORY = 40
RECENT_SESSIONS = 20


def read_form(form: Any) -> tuple[str, str, list[ChatMessage]]:
    """(session id, model, messages) from the posted form, or PageRefusal."""
    session_id = str(form.get("session") or "").strip() or DEFAULT_SESSION
    if len(session_id) > MAX_SESSION_ID:
        raise PageRefusal("tryit.error_session")
    model = str(form.get("model") or "").strip()
    text = str(form.get("message") or "").strip()
    if not text:
        raise PageRefusal("tryit.error_empty")
    if len(text) > MAX_MESSAGE_CHARS:
        raise PageRefusal("tryit.error_long")
    history: list[ChatMessage] = []
    raw = str(form.get("history") or "")
    if raw:
        try:
            parsed = json.loads(raw)
        except ValueError:
            raise PageRefusal("tryit.error_history") from None
        if not isinstance(parsed, list):
            raise PageRefusal("tryit.error_history")
        for item in parsed[-MAX_HISTORY:]:
            if (not isinstance(item, dict) or item.get("role") not in ("user", "assistant")
                    or not isinstance(item.get("content"), str)):
                raise PageRefusal("tryit.error_history")
            history.append({"role": item["role"], "content": item["content"]})
    return session_id, model, [*history, {"role": "user", "content": text}]


def panel_context(prepared: Any) -> dict[str, Any]:
    """The injected record grouped by kind, for the panel template."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for entry in prepared.injected:
        groups.setdefault(entry["kind"], []).append(entry)
    return {"injected": groups, "session_id": prepared.session_id, "model": prepared.model,
            "upstream_bytes": len(prepared.payload)}


async def _page_context(request: web.Request) -> dict[str, Any]:
    settings = await settings_of(request)
    sessions: list[str] = []
    if face_of(request, DATABASE) is not None:
        listed = await service.list_conversations(face_of(request, RECALL), limit=RECENT_SESSIONS,
                                                  settings=await settings_of(request))
        sessions = [row["session_id"] for row in listed["items"]]
    partition = bool(settings.CACHE_PARTITION_ENABLED)
    return {"sessions": sessions, "default_model": settings.DEFAULT_MODEL,
            "partition": partition, "thread": active_thread(settings) if partition else "",
            "session": DEFAULT_SESSION, "model": settings.DEFAULT_MODEL, "message": "",
            "reply": None, "error": None, "panel": None}


async def try_page(request: web.Request) -> web.Response:
    return render(request, TEMPLATE, await _page_context(request))


def _event(name: str, data: Any) -> bytes:
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"event: {name}\ndata: {payload}\n\n".encode()


class DeltaReader:
    """Reply text from the provider's SSE bytes as they arrive (split at any byte)."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, chunk: bytes) -> str:
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        text = []
        for line in lines:
            line = line.strip()
            if not line.startswith(b"data:"):
                continue
            try:
                event = json.loads(line[5:])
                delta = event["choices"][0].get("delta") or {}
            except (ValueError, KeyError, IndexError, TypeError, AttributeError):
                continue
            if isinstance(delta.get("content"), str):
                text.append(delta["content"])
        return "".join(text)


def _panel_html(request: web.Request, prepared: Any) -> str:
    env = aiohttp_jinja2.get_env(request.app)
    return env.get_template(PANEL).render({**base_context(request), **panel_context(prepared)})


def _wants_stream(request: web.Request) -> bool:
    return "text/event-stream" in request.headers.get("Accept", "")


async def send(request: web.Request) -> web.StreamResponse:
    """Send one message; a stream for the page's script, else the page with the reply."""
    lang = request_language(request)
    form = await request.post()
    streaming = _wants_stream(request)
    try:
        session_id, model, messages = read_form(form)
    except PageRefusal as exc:
        message = translate(lang, exc.key)
        if streaming:
            return web.Response(status=400, body=_event("failed", {"message": message}),
                                content_type="text/event-stream")
        context = await _page_context(request)
        context.update(error=message, session=str(form.get("session") or ""),
                       model=str(form.get("model") or ""))
        return render(request, TEMPLATE, context, status=400)
    events = trial_chat(face_of(request, TRIAL), session_id, model, messages,
                        settings=await settings_of(request))
    if streaming:
        return await _stream(request, events, lang)
    return await _collected(request, events, lang, session_id, model,
                            str(messages[-1]["content"]))  # the text just read


async def _stream(request: web.Request, events: Any, lang: str) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                           "Cache-Control": "no-cache",
                                           "X-Accel-Buffering": "no"})
    reader = DeltaReader()
    try:
        async for name, data in events:
            if not response.prepared:
                await response.prepare(request)
            if name == "prepared":
                await response.write(_event("injected", {"html": _panel_html(request, data)}))
            elif name == "chunk":
                text = reader.feed(data)
                if text:
                    await response.write(_event("delta", {"text": text}))
            elif name == "done":
                await response.write(_event("done", {"text": data["text"]}))
            else:
                await response.write(_event("failed", {
                    "message": translate(lang, "tryit.failed", status=data["status"],
                                         message=data["message"])}))
    except ChatRejected as exc:
        message = translate(lang, "tryit.refused", message=exc.message)
        if response.prepared:
            await response.write(_event("failed", {"message": message}))
        else:
            return web.Response(status=exc.status, body=_event("failed", {"message": message}),
                                content_type="text/event-stream")
    except ConnectionResetError:
        log.info("try-it page went away during the reply")
    finally:
        await events.aclose()
    if response.prepared:
        await response.write_eof()
    return response


async def _collected(request: web.Request, events: Any, lang: str, session_id: str,
                     model: str, text: str) -> web.Response:
    context = await _page_context(request)
    context.update(session=session_id, model=model, message=text)
    status = 200
    try:
        async for name, data in events:
            if name == "prepared":
                context["panel"] = panel_context(data)
            elif name == "done":
                context["reply"] = data["text"]
            elif name == "failed":
                context["error"] = translate(lang, "tryit.failed", status=data["status"],
                                             message=data["message"])
                status = 502
    except ChatRejected as exc:
        context["error"] = translate(lang, "tryit.refused", message=exc.message)
        status = exc.status
    finally:
        await events.aclose()
    return render(request, TEMPLATE, context, status=status)


def setup(dashboard: web.Application) -> None:
    dashboard.router.add_get("/try", try_page, name="tryit")
    dashboard.router.add_post("/try", send, name="tryit_send")
