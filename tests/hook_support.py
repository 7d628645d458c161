"""Helpers for running the hook scripts in integrations/ as real subprocesses against an app."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from pawwake.db.pool import cursor, fetch_all
from pawwake.services import services_of

ROOT = Path(__file__).resolve().parent.parent
PAYLOADS = Path(__file__).with_name("hook_payloads")
KEY = "hook-gateway-key-0123456789abcdef"
CLAUDE = ROOT / "integrations" / "claude-code"
CODEX = ROOT / "integrations" / "codex"
HOOK_SETTINGS: dict[str, Any] = {
    "GATEWAY_SECRET": KEY, "JOB_WORKERS": 0, "MEMORY_ENABLED": True,
    "MEMORY_VECTOR_ENABLED": False, "MEMORY_EXTRACT_INTERVAL": 1,
    "MEMORY_MODEL": "test/memory", "CONVERSATION_RECALL_ENABLED": True}


def base_url(client: Any) -> str:
    return str(client.server.make_url("")).rstrip("/")


def env_for(url: str) -> dict[str, str]:
    return {"PAWWAKE_URL": url, "PAWWAKE_GATEWAY_KEY": KEY}


def payload(name: str, **replace: str) -> str:
    text = (PAYLOADS / name).read_text()
    for old, new in replace.items():
        text = text.replace(old, new)
    return text


async def run_hook(script: Path, stdin: str, home: Path, env: dict[str, str] | None = None
                   ) -> tuple[int, str, str]:
    environment = {"HOME": str(home), "PATH": os.environ.get("PATH", "")}
    environment.update(env or {})
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(script), stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=environment)
    out, err = await process.communicate(stdin.encode("utf-8"))
    assert process.returncode is not None
    return process.returncode, out.decode("utf-8"), err.decode("utf-8")


def write_config(home: Path, url: str, mode: int = 0o600) -> None:
    folder = home / ".config" / "pawwake"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "hook.json"
    path.write_text(json.dumps({"url": url, "gateway_key": KEY}))
    path.chmod(mode)


def seen_ids(home: Path) -> set[str]:
    path = home / ".cache" / "pawwake" / "seen.json"
    if not path.exists():
        return set()
    return {fid for ids in json.loads(path.read_text()).values() for fid in ids}


def spool_dir(home: Path) -> Path:
    return home / ".config" / "pawwake" / "spool"


def spooled(home: Path) -> list[Path]:
    folder = spool_dir(home)
    return sorted(folder.glob("*.json")) if folder.exists() else []


async def stored(client: Any, where: str = "TRUE") -> list[dict[str, Any]]:
    async with cursor(services_of(client.server.app).database.pool) as cur:
        rows = await fetch_all(cur,
                               "SELECT role, content, source, session_id, turn_id, model"
                               f" FROM conversations WHERE {where} ORDER BY created_at, id")
    return [dict(row) for row in rows]


async def seed(client: Any) -> None:
    headers = {"X-Gateway-Key": KEY}
    for number, (user, reply) in enumerate([
            ("下个月去京都旅行，清水寺那天怎么安排", "早上七点到清水寺，中午去二年坂吃汤豆腐。"),
            ("推荐一本讲量子力学的书", "可以读费曼物理学讲义第三卷。")]):
        resp = await client.post("/api/conversations/turn", headers=headers, json={
            "turn_id": f"seed-{number}", "session_id": f"old-session-{number}",
            "source": "claude-code", "messages": [{"role": "user", "content": user},
                                                  {"role": "assistant", "content": reply}]})
        assert resp.status == 201
    resp = await client.post("/api/memories", headers=headers,
                             json={"content": "用户计划三月去京都旅行", "importance": 7})
    assert resp.status == 201
