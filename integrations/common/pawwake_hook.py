"""Shared helpers of the Pawwake hooks for Claude Code and Codex (standard library only,
Python 3.9+): configuration, HTTP calls, the recall block, turn writing with the local spool.

The gateway key is read from PAWWAKE_GATEWAY_KEY or ~/.config/pawwake/hook.json (mode 0600; a
file others can read is refused) and sent only in the X-Gateway-Key header, never in argv or a
URL. Every failure is silent towards the CLI: a hook must never break a prompt.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from datetime import date, datetime, timedelta, timezone
from typing import Any

import pawwake_spool
import pawwake_state

CONFIG_PATH = os.path.join("~", ".config", "pawwake", "hook.json")
TURN_PATH = "/api/conversations/turn"
TIMEOUT_SECONDS = 4.0
PROMPT_SPOOL_BUDGET_SECONDS = 1.0  # a prompt waits for the recall hook: keep this short
STOP_SPOOL_BUDGET_SECONDS = 3.0
MAX_MEMORIES = 8
MAX_FRAGMENTS = 3
MAX_BLOCK_CHARS = 4000


class ConfigError(Exception):
    """The configuration is missing or unsafe; the message says what to fix."""


def load_config() -> dict[str, str]:
    """URL, key and an optional time zone offset: the environment wins over the config file."""
    url = os.environ.get("PAWWAKE_URL", "").strip()
    key = os.environ.get("PAWWAKE_GATEWAY_KEY", "").strip()
    zone = os.environ.get("PAWWAKE_TIMEZONE_HOURS", "").strip()
    if not (url and key):  # with both in the environment, the file is not read
        path = os.path.expanduser(CONFIG_PATH)
        if os.path.exists(path):
            mode = os.stat(path).st_mode
            if mode & (stat.S_IRWXG | stat.S_IRWXO):
                raise ConfigError(f"{path} is readable by others; run: chmod 600 {path}")
            with open(path, encoding="utf-8") as handle:
                data = json.load(handle)
            if not isinstance(data, dict):
                raise ConfigError(f"{path} must hold a JSON object")
            url = url or str(data.get("url") or "").strip()
            key = key or str(data.get("gateway_key") or "").strip()
            zone = zone or str(data.get("timezone_hours", "")).strip()
    if not url:
        raise ConfigError("set PAWWAKE_URL or \"url\" in ~/.config/pawwake/hook.json")
    return {"url": url.rstrip("/"), "key": key, "timezone_hours": zone}


def zone_hours(*candidates: Any) -> float:
    """The first usable offset in hours (-12..14): the person's own setting, else the server's
    TIMEZONE_HOURS from its answer; UTC when neither says."""
    for value in candidates:
        try:
            hours = float(value)
        except (TypeError, ValueError):
            continue
        if -12 <= hours <= 14:
            return hours
    return 0.0


def local_stamp(value: Any, hours: float) -> str:
    """``YYYY-MM-DD HH:MM`` in the offset, as the gateway's own injection prints times."""
    try:
        moment = datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
    except ValueError:
        return str(value)[:16].replace("T", " ")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)  # noqa: UP017 (runs on Python 3.9+)
    return moment.astimezone(timezone(timedelta(hours=hours))).strftime("%Y-%m-%d %H:%M")


def memory_date(item: dict[str, Any], hours: float) -> str:
    """The event's date when known, else the local creation date (like the gateway)."""
    event = item.get("event_date")
    if isinstance(event, str) and event:
        try:
            return date.fromisoformat(event[:10]).isoformat()
        except ValueError:
            pass
    created = item.get("created_at")
    return local_stamp(created, hours)[:10] if created else ""


def post_json(config: dict[str, str], path: str, body: dict[str, Any],
              timeout: float = TIMEOUT_SECONDS) -> Any:
    """POST JSON and return the decoded answer; raises OSError/ValueError on any failure."""
    data = json.dumps(body, ensure_ascii=True).encode("ascii")  # lone surrogates survive
    request = urllib.request.Request(config["url"] + path, data=data, method="POST")
    request.add_header("Content-Type", "application/json")
    if config.get("key"):
        request.add_header("X-Gateway-Key", config["key"])
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read().decode("utf-8") or "null")


def read_stdin_json() -> dict[str, Any]:
    """The hook input; text that is not UTF-8 is replaced, not fatal."""
    try:
        data = json.loads(sys.stdin.buffer.read().decode("utf-8", "replace") or "{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def text_field(hook: dict[str, Any], name: str) -> str:
    """A non-blank string field of the hook input, or ""."""
    value = hook.get(name)
    return value if isinstance(value, str) and value.strip() else ""


def _clip(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def render_block(memories: list[dict[str, Any]], fragments: list[dict[str, Any]],
                 hours: float = 0.0) -> str:
    """The bounded "historical reference" block printed for the CLI's context; times are
    local to ``hours`` east of UTC."""
    lines = []
    if memories:
        lines.append("相关记忆 / Related memories:")
        for item in memories[:MAX_MEMORIES]:
            day = memory_date(item, hours)
            lines.append("- " + (f"[{day}] " if day else "")
                         + _clip(item.get("content", ""), 300))
    if fragments:
        if lines:
            lines.append("")
        lines.append("相关历史对话 / Related past conversations:")
        for fragment in fragments[:MAX_FRAGMENTS]:
            for message in fragment.get("messages") or []:
                who = "用户" if message.get("role") == "user" else "AI"
                stamp = local_stamp(message.get("created_at", ""), hours)
                lines.append(f"[{stamp}] {who}: " + _clip(message.get("content", ""), 200))
            lines.append("")
    if not lines:
        return ""
    body = "\n".join(lines).strip()
    if len(body) > MAX_BLOCK_CHARS:
        body = body[:MAX_BLOCK_CHARS - 1] + "…"
    return ("<pawwake_history_reference>\n"
            "以下是 Pawwake 检索到的历史参考，仅供参考，可能已过时。\n"
            "Historical reference from Pawwake; it may be outdated.\n\n"
            + body + "\n</pawwake_history_reference>")


def say_if_refused(exc: urllib.error.HTTPError) -> None:
    """A wrong key is the one failure the person can fix: say it (stderr only)."""
    if exc.code in (401, 403):
        sys.stderr.write(f"pawwake hook: Pawwake refused the gateway key (HTTP {exc.code});"
                         " check PAWWAKE_GATEWAY_KEY or ~/.config/pawwake/hook.json\n")


class Recall:
    """What the recall hook found: the block to print and the fragment ids inside it."""

    def __init__(self, block: str = "", fragment_ids: list[str] | None = None,
                 reached: bool = False) -> None:
        self.block = block
        self.fragment_ids = fragment_ids or []
        self.reached = reached  # Pawwake answered at least one search


def recall(config: dict[str, str], prompt: str, session_id: str) -> Recall:
    """Search memories and past conversations for the prompt."""
    query = prompt.strip()[:2000]
    memories: list[dict[str, Any]] = []
    fragments: list[dict[str, Any]] = []
    server_zone: Any = None
    reached = False
    try:
        answer = post_json(config, "/api/memories/search", {"q": query, "limit": MAX_MEMORIES})
        memories = [r.get("memory", r) for r in (answer or {}).get("results") or []]
        server_zone = (answer or {}).get("timezone_hours")
        reached = True
    except urllib.error.HTTPError as exc:
        reached = True
        say_if_refused(exc)
    except (OSError, ValueError, AttributeError):
        pass
    try:
        body: dict[str, Any] = {"q": query, "max_sessions": MAX_FRAGMENTS, "context": 1,
                                "exclude_fragment_ids": pawwake_state.seen_fragments(session_id)}
        if session_id:
            body["exclude_session_ids"] = [session_id]
        answer = post_json(config, "/api/chat/search-fragments", body)
        fragments = list((answer or {}).get("fragments") or [])[:MAX_FRAGMENTS]
        if server_zone is None:
            server_zone = (answer or {}).get("timezone_hours")
        reached = True
    except urllib.error.HTTPError:
        reached = True
    except (OSError, ValueError, AttributeError):
        pass
    block = render_block(memories, fragments,
                         zone_hours(config.get("timezone_hours"), server_zone))
    ids = [f["fragment_id"] for f in fragments if isinstance(f.get("fragment_id"), str)]
    return Recall(block, ids if block else [], reached)


def on_prompt(hook: dict[str, Any], turn_key: str, replace_session: bool = False) -> str:
    """UserPromptSubmit for both CLIs: keep the prompt as pending for its Stop, recall, and
    send spooled turns when Pawwake answered. Returns the block to print (or "")."""
    prompt, session_id = text_field(hook, "prompt"), text_field(hook, "session_id")
    if not prompt:
        return ""
    config = load_config()
    if session_id and turn_key:  # kept first: a recall that times out loses nothing
        pawwake_state.keep_pending(session_id, turn_key, {"prompt": prompt, "fragments": []},
                                   replace_session)
    found = recall(config, prompt, session_id)
    if found.fragment_ids and session_id and turn_key:
        pawwake_state.update_pending(session_id, turn_key, fragments=found.fragment_ids)
    if found.reached:
        deliver_spool(config, PROMPT_SPOOL_BUDGET_SECONDS)
    return found.block


def deliver_spool(config: dict[str, str], budget: float) -> bool:
    """Send turns kept while Pawwake was unreachable; False when it still is."""
    return pawwake_spool.deliver(
        lambda turn, timeout: post_json(config, TURN_PATH, turn, min(timeout, TIMEOUT_SECONDS)),
        budget)


def write_turn(turn: dict[str, Any] | None) -> None:
    """Stop writers: send older spooled turns, then ``turn``; keep it in the spool when
    Pawwake cannot take it now."""
    config = load_config()
    reachable = deliver_spool(config, STOP_SPOOL_BUDGET_SECONDS)
    if turn is None:
        return
    if reachable:
        try:
            post_json(config, TURN_PATH, turn)
            if turn.get("replace_reply"):
                pawwake_spool.forget(turn)
            return
        except urllib.error.HTTPError as exc:
            if exc.code in pawwake_spool.PERMANENT_STATUSES:
                kept = pawwake_spool.spool_turn(turn, suffix=".rejected")
                sys.stderr.write(f"pawwake hook: Pawwake refused the turn (HTTP {exc.code})"
                                 + (f"; kept in {pawwake_spool.SPOOL_DIR}" if kept else "")
                                 + "\n")
                return
            say_if_refused(exc)
        except (OSError, ValueError):
            pass
    if not pawwake_spool.spool_turn(turn):
        sys.stderr.write(f"pawwake hook: Pawwake is unreachable and the local spool is full"
                         f" ({pawwake_spool.SPOOL_MAX_FILES} turns or"
                         f" {pawwake_spool.SPOOL_MAX_BYTES // 1048576} MiB in"
                         f" {pawwake_spool.SPOOL_DIR}); this turn was not kept\n")


def run(main: Callable[[], None], stop_json: bool = False) -> None:
    """Run a hook's main function: never fail the CLI, say why on stderr only.

    ``stop_json``: Codex validates a Stop hook's stdout as JSON, so ``{}`` (go on, nothing to
    add) is printed on every path, errors included.
    """
    try:
        main()
    except ConfigError as exc:
        sys.stderr.write(f"pawwake hook: {exc}\n")
    except urllib.error.HTTPError as exc:
        say_if_refused(exc)
    except (OSError, ValueError):
        pass  # Pawwake unreachable or answered badly: the prompt goes on without history
    except Exception as exc:  # a hook must never break the CLI
        sys.stderr.write(f"pawwake hook: unexpected {type(exc).__name__}\n")
    finally:
        if stop_json:
            sys.stdout.write("{}\n")
            sys.stdout.flush()
    sys.exit(0)
