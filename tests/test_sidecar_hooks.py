"""The hook scripts as real subprocesses against a live app, fed recorded hook payloads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pawwake.db.pool import cursor, fetch_all
from pawwake.services import services_of
from tests.hook_support import (
    CLAUDE,
    CODEX,
    HOOK_SETTINGS,
    KEY,
    PAYLOADS,
    base_url,
    run_hook,
    seed,
    write_config,
)


@pytest.fixture
async def client(make_client: Any) -> Any:
    return await make_client(**HOOK_SETTINGS)


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
    # printed fragments wait for the Stop writer before they count as seen
    pending = json.loads((tmp_path / ".cache" / "pawwake" / "pending.json").read_text())
    (entry,) = pending.values()
    assert entry["prompt"] == json.loads(payload)["prompt"]
    assert entry["fragments"] and all(fid.startswith("v1:") for fid in entry["fragments"])
    assert not (tmp_path / ".cache" / "pawwake" / "seen.json").exists()
    for path in (tmp_path / ".cache" / "pawwake").glob("*.json"):
        assert path.stat().st_mode & 0o777 == 0o600


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
    async with cursor(services_of(client.server.app).database.pool) as cur:
        stored = await fetch_all(cur,
                                 "SELECT role, content, source, session_id, turn_id, model"
                                 " FROM conversations ORDER BY created_at, id")
    assert [(r["role"], r["content"]) for r in stored] == [
        ("user", "帮我看看清水寺那天的行程，顺便查一下天气"),
        ("assistant", "那天晴天，建议早上七点到清水寺，避开人潮，中午去二年坂吃汤豆腐。")]
    # Claude Code's prompt_id names the turn
    assert stored[0]["turn_id"] == json.loads(payload)["prompt_id"]
    assert stored[0]["source"] == "claude-code"
    assert stored[1]["model"] == "claude-sonnet-4-5"
    async with cursor(services_of(client.server.app).database.pool) as cur:
        jobs = await fetch_all(cur,
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
        assert (code, json.loads(out), err) == (0, {}, "")
    async with cursor(services_of(client.server.app).database.pool) as cur:
        stored = await fetch_all(cur,
                                 "SELECT role, content FROM conversations WHERE source = 'codex'"
                                 " ORDER BY created_at, id")
    assert [r["content"] for r in stored] == ["京都旅行清水寺那天的安排还记得吗？",
                                              "记得：早上七点到清水寺，中午在二年坂吃汤豆腐。"]


async def test_unreachable_server_exits_quietly(tmp_path: Path, unused_tcp_port: int) -> None:
    env = {"PAWWAKE_URL": f"http://127.0.0.1:{unused_tcp_port}", "PAWWAKE_GATEWAY_KEY": KEY}
    payload = (PAYLOADS / "claude_user_prompt_submit.json").read_text()
    assert await run_hook(CLAUDE / "pawwake_recall.py", payload, tmp_path, env) == (0, "", "")
    stop = (PAYLOADS / "codex_stop.json").read_text()
    assert await run_hook(CODEX / "pawwake_turn_writer.py", stop, tmp_path, env) == (0, "{}\n",
                                                                                    "")


async def test_a_config_file_others_can_read_is_refused(client: Any, tmp_path: Path) -> None:
    await seed(client)
    write_config(tmp_path, base_url(client), mode=0o644)
    payload = (PAYLOADS / "claude_user_prompt_submit.json").read_text()
    code, out, err = await run_hook(CLAUDE / "pawwake_recall.py", payload, tmp_path)
    assert (code, out) == (0, "")
    assert "chmod 600" in err and KEY not in err
