"""Shared helpers of the Pawwake hooks for Claude Code and Codex (standard library only,
Python 3.9+): configuration, HTTP calls, the local seen set, the recall block.

The gateway key is read from PAWWAKE_GATEWAY_KEY or ~/.config/pawwake/hook.json (mode 0600; a
file others can read is refused) and sent only in the X-Gateway-Key header, never in argv or a
URL. Every failure is silent towards the CLI: a hook must never break a prompt.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import tempfile
import time
import urllib.error
import urllib.request
from typing import Any

CONFIG_PATH = os.path.join("~", ".config", "pawwake", "hook.json")
CACHE_DIR = os.path.join("~", ".cache", "pawwake")
TIMEOUT_SECONDS = 4.0
SEEN_TTL_SECONDS = 6 * 3600
MAX_MEMORIES = 8
MAX_FRAGMENTS = 3
MAX_BLOCK_CHARS = 4000


class ConfigError(Exception):
    """The configuration is missing or unsafe; the message says what to fix."""


def load_config() -> dict[str, str]:
    """URL and key: the environment wins over the config file."""
    url = os.environ.get("PAWWAKE_URL", "").strip()
    key = os.environ.get("PAWWAKE_GATEWAY_KEY", "").strip()
    if not (url and key):
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
    if not url:
        raise ConfigError("set PAWWAKE_URL or \"url\" in ~/.config/pawwake/hook.json")
    return {"url": url.rstrip("/"), "key": key}


def post_json(config: dict[str, str], path: str, body: dict[str, Any],
              timeout: float = TIMEOUT_SECONDS) -> Any:
    """POST JSON and return the decoded answer; raises OSError/ValueError on any failure."""
    data = json.dumps(body, ensure_ascii=False).encode("utf-8")
    request = urllib.request.Request(config["url"] + path, data=data, method="POST")
    request.add_header("Content-Type", "application/json")
    if config.get("key"):
        request.add_header("X-Gateway-Key", config["key"])
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read().decode("utf-8") or "null")


def read_stdin_json() -> dict[str, Any]:
    try:
        data = json.loads(sys.stdin.read() or "{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _cache_file(name: str) -> str:
    directory = os.path.expanduser(CACHE_DIR)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    return os.path.join(directory, name)


def _read_state(name: str) -> dict[str, Any]:
    try:
        with open(_cache_file(name), encoding="utf-8") as handle:
            data = json.load(handle)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _write_state(name: str, data: dict[str, Any]) -> None:
    """Write atomically with mode 0600 (the files hold conversation ids and text)."""
    path = _cache_file(name)
    handle, temp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(data, out, ensure_ascii=False)
        os.chmod(temp, 0o600)
        os.replace(temp, path)
    except OSError:
        try:
            os.unlink(temp)
        except OSError:
            pass


def seen_fragments(session_id: str) -> list[str]:
    """Fragment ids already shown in this CLI session and still within the TTL."""
    now = time.time()
    seen = _read_state("seen.json").get(session_id) or {}
    return sorted(fid for fid, at in seen.items() if now - float(at) < SEEN_TTL_SECONDS)


def mark_fragments_seen(session_id: str, fragment_ids: list[str]) -> None:
    if not fragment_ids:
        return
    now = time.time()
    state = _read_state("seen.json")
    for sid in list(state):
        kept = {f: at for f, at in (state.get(sid) or {}).items()
                if now - float(at) < SEEN_TTL_SECONDS}
        if kept:
            state[sid] = kept
        else:
            del state[sid]
    state.setdefault(session_id, {}).update({fid: now for fid in fragment_ids})
    _write_state("seen.json", state)


def remember_prompt(session_id: str, turn_id: str, prompt: str) -> None:
    """Keep the prompt of a Codex turn until its Stop hook writes the turn back."""
    state = _read_state("prompts.json")
    now = time.time()
    state = {k: v for k, v in state.items() if now - float(v.get("at", 0)) < 86400}
    state[session_id + "\n" + turn_id] = {"prompt": prompt, "at": now}
    _write_state("prompts.json", state)


def take_prompt(session_id: str, turn_id: str) -> dict[str, Any] | None:
    state = _read_state("prompts.json")
    entry = state.pop(session_id + "\n" + turn_id, None)
    if entry is not None:
        _write_state("prompts.json", state)
    return entry


def _clip(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def render_block(memories: list[dict[str, Any]], fragments: list[dict[str, Any]]) -> str:
    """The bounded "historical reference" block printed for the CLI's context."""
    lines = []
    if memories:
        lines.append("相关记忆 / Related memories:")
        for item in memories[:MAX_MEMORIES]:
            lines.append("- " + _clip(item.get("content", ""), 300))
    if fragments:
        if lines:
            lines.append("")
        lines.append("相关历史对话 / Related past conversations:")
        for fragment in fragments[:MAX_FRAGMENTS]:
            for message in fragment.get("messages") or []:
                who = "用户" if message.get("role") == "user" else "AI"
                stamp = str(message.get("created_at", ""))[:16].replace("T", " ")
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


def recall(hook_input: dict[str, Any], source: str) -> str:
    """Search memories and past conversations for the prompt; returns the block (or "")."""
    prompt = hook_input.get("prompt")
    session_id = str(hook_input.get("session_id") or "")
    if not isinstance(prompt, str) or not prompt.strip():
        return ""
    query = prompt.strip()[:2000]
    config = load_config()
    memories: list[dict[str, Any]] = []
    fragments: list[dict[str, Any]] = []
    try:
        answer = post_json(config, "/api/memories/search", {"q": query, "limit": MAX_MEMORIES})
        memories = [r.get("memory", r) for r in (answer or {}).get("results") or []]
    except (OSError, ValueError):
        pass
    try:
        body: dict[str, Any] = {"q": query, "max_sessions": MAX_FRAGMENTS, "context": 1,
                                "exclude_fragment_ids": seen_fragments(session_id)}
        if session_id:
            body["exclude_session_ids"] = [session_id]
        answer = post_json(config, "/api/chat/search-fragments", body)
        fragments = list((answer or {}).get("fragments") or [])
    except (OSError, ValueError):
        pass
    block = render_block(memories, fragments)
    if block and session_id:
        mark_fragments_seen(session_id, [f["fragment_id"] for f in fragments
                                         if isinstance(f.get("fragment_id"), str)])
    return block


def send_turn(turn: dict[str, Any]) -> None:
    config = load_config()
    post_json(config, "/api/conversations/turn", turn)


def run(main: Any) -> None:
    """Run a hook's main function: never fail the CLI, say why on stderr only."""
    try:
        main()
    except ConfigError as exc:
        sys.stderr.write(f"pawwake hook: {exc}\n")
    except (OSError, ValueError, urllib.error.URLError):
        pass  # Pawwake unreachable or answered badly: the prompt goes on without history
    sys.exit(0)
