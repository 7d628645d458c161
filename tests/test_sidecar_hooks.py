"""The hook scripts as real subprocesses against a live app, fed recorded hook payloads."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from pawwake import keys
from pawwake.db.pool import fetch_all

ROOT = Path(__file__).resolve().parent.parent
PAYLOADS = Path(__file__).with_name("hook_payloads")
KEY = "hook-gateway-key-0123456789abcdef"
CLAUDE = ROOT / "integrations" / "claude-code"
CODEX = ROOT / "integrations" / "codex"


@pytest.fixture
async def client(make_client: Any) -> Any:
    return await make_client(GATEWAY_SECRET=KEY, JOB_WORKERS=0, MEMORY_ENABLED=True,
                             MEMORY_VECTOR_ENABLED=False, MEMORY_EXTRACT_INTERVAL=1,
                             MEMORY_MODEL="test/memory", CONVERSATION_RECALL_ENABLED=True)


def base_url(client: Any) -> str:
    return str(client.server.make_url("")).rstrip("/")


async def run_hook(script: Path, payload: str, home: Path, env: dict[str, str] | None = None
                   ) -> tuple[int, str, str]:
    environment = {"HOME": str(home), "PATH": os.environ.get("PATH", "")}
    environment.update(env or {})
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(script), stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=environment)
    out, err = await process.communicate(payload.encode("utf-8"))
    return process.returncode, out.decode("utf-8"), err.decode("utf-8")


def write_config(home: Path, url: str, mode: int = 0o600) -> None:
    folder = home / ".config" / "pawwake"
    folder.mkdir(parents=True)
    path = folder / "hook.json"
    path.write_text(json.dumps({"url": url, "gateway_key": KEY}))
    path.chmod(mode)


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


async def test_claude_recall_prints_memories_and_fragments(client: Any, tmp_path: Path) -> None:
    await seed(client)
    write_config(tmp_path, base_url(client))
    payload = (PAYLOADS / "claude_user_prompt_submit.json").read_text()
    code, out, err = await run_hook(CLAUDE / "pawwake_recall.py", payload, tmp_path)
    assert (code, err) == (0, "")
    assert out.startswith("<pawwake_history_reference>")
    assert "用户计划三月去京都旅行" in out
    assert "早上七点到清水寺" in out
    assert "量子力学" not in out
    seen = json.loads((tmp_path / ".cache" / "pawwake" / "seen.json").read_text())
    (session_seen,) = seen.values()
    assert all(fid.startswith("v1:") for fid in session_seen)
    # the seen fragment is excluded next time: the same prompt brings no fragment again
    code, again, _ = await run_hook(CLAUDE / "pawwake_recall.py", payload, tmp_path)
    assert code == 0 and "早上七点到清水寺" not in again and "用户计划三月去京都旅行" in again


async def test_claude_writer_stores_the_real_turn_once(client: Any, tmp_path: Path) -> None:
    transcript = tmp_path / "transcript.jsonl"
    transcript.write_text((PAYLOADS / "claude_transcript.jsonl").read_text())
    payload = (PAYLOADS / "claude_stop.json").read_text().replace("TRANSCRIPT_PATH",
                                                                  str(transcript))
    env = {"PAWWAKE_URL": base_url(client), "PAWWAKE_GATEWAY_KEY": KEY}
    for _ in range(2):
        code, out, err = await run_hook(CLAUDE / "pawwake_turn_writer.py", payload, tmp_path,
                                        env)
        assert (code, out, err) == (0, "", "")
    stored = await fetch_all(client.server.app[keys.DATABASE].pool,
                             "SELECT role, content, source, session_id, turn_id, model"
                             " FROM conversations ORDER BY created_at, id")
    assert [(r["role"], r["content"]) for r in stored] == [
        ("user", "帮我看看清水寺那天的行程，顺便查一下天气"),
        ("assistant", "那天晴天，建议早上七点到清水寺，避开人潮，中午去二年坂吃汤豆腐。")]
    assert stored[0]["turn_id"] == "u1" and stored[0]["source"] == "claude-code"
    assert stored[1]["model"] == "claude-sonnet-4-5"
    jobs = await fetch_all(client.server.app[keys.DATABASE].pool,
                           "SELECT id FROM jobs WHERE kind = 'memory_extract'")
    assert len(jobs) == 1


async def test_codex_recall_then_stop_writes_the_turn(client: Any, tmp_path: Path) -> None:
    await seed(client)
    env = {"PAWWAKE_URL": base_url(client), "PAWWAKE_GATEWAY_KEY": KEY}
    code, out, _ = await run_hook(CODEX / "pawwake_recall.py",
                                  (PAYLOADS / "codex_user_prompt_submit.json").read_text(),
                                  tmp_path, env)
    assert code == 0 and "早上七点到清水寺" in out
    stop = (PAYLOADS / "codex_stop.json").read_text()
    for _ in range(2):  # a repeated Stop stores nothing twice
        code, out, err = await run_hook(CODEX / "pawwake_turn_writer.py", stop, tmp_path, env)
        assert (code, out, err) == (0, "", "")
    stored = await fetch_all(client.server.app[keys.DATABASE].pool,
                             "SELECT role, content FROM conversations WHERE source = 'codex'"
                             " ORDER BY created_at, id")
    assert [r["content"] for r in stored] == ["京都旅行清水寺那天的安排还记得吗？",
                                              "记得：早上七点到清水寺，中午在二年坂吃汤豆腐。"]


async def test_unreachable_server_exits_quietly(tmp_path: Path, unused_tcp_port: int) -> None:
    env = {"PAWWAKE_URL": f"http://127.0.0.1:{unused_tcp_port}", "PAWWAKE_GATEWAY_KEY": KEY}
    payload = (PAYLOADS / "claude_user_prompt_submit.json").read_text()
    assert await run_hook(CLAUDE / "pawwake_recall.py", payload, tmp_path, env) == (0, "", "")
    stop = (PAYLOADS / "codex_stop.json").read_text()
    assert await run_hook(CODEX / "pawwake_turn_writer.py", stop, tmp_path, env) == (0, "", "")


async def test_a_config_file_others_can_read_is_refused(client: Any, tmp_path: Path) -> None:
    await seed(client)
    write_config(tmp_path, base_url(client), mode=0o644)
    payload = (PAYLOADS / "claude_user_prompt_submit.json").read_text()
    code, out, err = await run_hook(CLAUDE / "pawwake_recall.py", payload, tmp_path)
    assert (code, out) == (0, "")
    assert "chmod 600" in err and KEY not in err
