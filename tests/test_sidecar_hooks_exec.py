"""`codex exec` runs store only the real input and the final message; hook blocks print times
in TIMEZONE_HOURS like the gateway's own injection. Real subprocesses against the real app."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.hook_support import (
    CLAUDE,
    CODEX,
    HOOK_SETTINGS,
    KEY,
    base_url,
    env_for,
    payload,
    run_hook,
    stored,
    write_config,
)

PROMPT = "把京都行程整理成一张表"
FINAL = "| 时间 | 地点 |\n| 07:00 | 清水寺 |"
NOISE = ["thinking about the itinerary", "exec bash -lc 'cat plan.md'", "plan.md: 清水寺 二年坂",
         '{"type":"item.completed"}', "tokens used: 1234"]

# A stand-in for the Codex CLI: progress and command output on stderr, an event stream on
# stdout, and the final message in the --output-last-message file, as `codex exec` does.
FAKE_CODEX = '''#!{python}
import json, os, sys
args = sys.argv[1:]
assert args[0] == "exec", args
last = args[args.index("--output-last-message") + 1] if "--output-last-message" in args else None
prompt = sys.stdin.read() if args[-1] == "-" else args[-1]
with open(os.environ["FAKE_CODEX_LOG"], "w") as log:
    json.dump({{"args": args, "prompt": prompt,
               "exec_writer": os.environ.get("PAWWAKE_EXEC_WRITER")}}, log)
sys.stderr.write("[2026-03-01T10:00:00] thinking about the itinerary\\n")
sys.stderr.write("exec bash -lc 'cat plan.md'\\nplan.md: 清水寺 二年坂\\ntokens used: 1234\\n")
sys.stdout.write('{{"type":"item.completed"}}\\n')
sys.stdout.write(os.environ.get("FAKE_CODEX_FINAL", ""))
status = int(os.environ.get("FAKE_CODEX_STATUS", "0"))
if last and status == 0:
    with open(last, "w") as out:
        out.write(os.environ.get("FAKE_CODEX_FINAL", ""))
sys.exit(status)
'''


@pytest.fixture
async def client(make_client: Any) -> Any:
    return await make_client(**HOOK_SETTINGS, TIMEZONE_HOURS=8)


@pytest.fixture
def fake_codex(tmp_path: Path) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    path = folder / "codex"
    path.write_text(FAKE_CODEX.format(python=sys.executable))
    path.chmod(0o755)
    return path


async def run_exec(args: list[str], home: Path, env: dict[str, str], stdin: str = ""
                   ) -> tuple[int, str, str]:
    environment = {"HOME": str(home), **env,
                   "PATH": str(home / "bin") + os.pathsep + os.environ.get("PATH", "")}
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(CODEX / "pawwake_exec.py"), *args, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=environment,
        cwd=str(home))
    out, err = await process.communicate(stdin.encode("utf-8"))
    assert process.returncode is not None
    return process.returncode, out.decode("utf-8"), err.decode("utf-8")


@pytest.mark.parametrize("from_stdin", [False, True])
async def test_codex_exec_stores_the_input_and_the_final_message_only(
        client: Any, tmp_path: Path, fake_codex: Path, from_stdin: bool) -> None:
    env = {**env_for(base_url(client)), "FAKE_CODEX_FINAL": FINAL,
           "FAKE_CODEX_LOG": str(tmp_path / "codex.json")}
    args = ["-m", "gpt-5-codex", "-"] if from_stdin else ["-m", "gpt-5-codex", PROMPT]
    code, out, err = await run_exec(args, tmp_path, env, stdin=PROMPT if from_stdin else "")
    assert code == 0
    # Codex's own streams reach the terminal unchanged...
    assert FINAL in out and '{"type":"item.completed"}' in out
    assert "thinking about the itinerary" in err
    # ...and only the real input and the final message are stored.
    rows = await stored(client)
    assert [(r["role"], r["content"]) for r in rows] == [("user", PROMPT), ("assistant", FINAL)]
    assert {r["source"] for r in rows} == {"codex"}
    assert rows[0]["session_id"] == "codex-exec" and rows[0]["model"] == "gpt-5-codex"
    text = json.dumps([r["content"] for r in rows], ensure_ascii=False)
    for noise in NOISE:
        assert noise not in text
    ran = json.loads((tmp_path / "codex.json").read_text())
    assert ran["prompt"] == PROMPT and ran["exec_writer"] == "1"
    assert not any(KEY in arg for arg in ran["args"])  # the key never reaches argv


async def test_a_failed_codex_exec_run_stores_nothing_and_keeps_its_status(
        client: Any, tmp_path: Path, fake_codex: Path) -> None:
    env = {**env_for(base_url(client)), "FAKE_CODEX_FINAL": FINAL, "FAKE_CODEX_STATUS": "3",
           "FAKE_CODEX_LOG": str(tmp_path / "codex.json")}
    code, _, _ = await run_exec([PROMPT], tmp_path, env)
    assert code == 3
    assert await stored(client) == []


async def test_the_stop_hook_leaves_an_exec_run_to_the_wrapper(client: Any,
                                                              tmp_path: Path) -> None:
    """Inside a wrapped `codex exec` run, Codex's own Stop hook does not store a second copy."""
    up = {**env_for(base_url(client)), "PAWWAKE_EXEC_WRITER": "1"}
    await run_hook(CODEX / "pawwake_recall.py", payload("codex_user_prompt_submit.json"),
                   tmp_path, up)
    code, out, _ = await run_hook(CODEX / "pawwake_turn_writer.py", payload("codex_stop.json"),
                                  tmp_path, up)
    assert (code, json.loads(out)) == (0, {})
    assert await stored(client) == []


async def seed_at(client: Any) -> None:
    """A past conversation at 23:30 UTC (07:30 the next morning at UTC+8) and a memory."""
    headers = {"X-Gateway-Key": KEY}
    resp = await client.post("/api/conversations/turn", headers=headers, json={
        "turn_id": "old-0", "session_id": "old-session", "source": "claude-code",
        "occurred_at": "2026-03-01T23:30:00Z",
        "messages": [{"role": "user", "content": "下个月去京都旅行，清水寺那天怎么安排"},
                     {"role": "assistant", "content": "早上七点到清水寺，中午去二年坂吃汤豆腐。"}]})
    assert resp.status == 201
    resp = await client.post("/api/memories", headers=headers,
                             json={"content": "用户计划三月去京都旅行", "importance": 7,
                                   "event_date": "2026-03-15"})
    assert resp.status == 201, await resp.text()


async def test_hook_block_times_follow_the_server_timezone(client: Any, tmp_path: Path) -> None:
    await seed_at(client)
    write_config(tmp_path, base_url(client))
    code, out, err = await run_hook(CLAUDE / "pawwake_recall.py",
                                    payload("claude_user_prompt_submit.json"), tmp_path)
    assert (code, err) == (0, "")
    assert "[2026-03-02 07:30] 用户: 下个月去京都旅行" in out  # UTC+8, as the gateway prints
    assert "2026-03-01 23:30" not in out
    assert "- [2026-03-15] 用户计划三月去京都旅行" in out


async def test_the_hook_config_can_set_its_own_offset(client: Any, tmp_path: Path) -> None:
    await seed_at(client)
    env = {**env_for(base_url(client)), "PAWWAKE_TIMEZONE_HOURS": "-5"}
    code, out, _ = await run_hook(CODEX / "pawwake_recall.py",
                                  payload("codex_user_prompt_submit.json"), tmp_path, env)
    assert code == 0
    assert "[2026-03-01 18:30] 用户: 下个月去京都旅行" in out
