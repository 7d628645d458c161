"""The real Claude Code CLI, headless (``claude -p``), through the gateway to a fake
Anthropic-format provider: the reply reaches it, the memory reaches the provider, and the
turn is stored under Claude Code's own session id.

The CLI is installed (pinned) by ``.ci/run`` into ``PAWWAKE_CLIENTS_DIR`` (default
``~/.cache/pawwake-clients``); the test is skipped only when it is not there.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from tests.fake_anthropic import FakeAnthropic
from tests.gateway_support import GATEWAY_KEY, settle, stored_messages
from tests.messages_support import (
    MEMORY_ON,
    anthropic_upstream,  # noqa: F401  (fixture)
    start_gateway,
)
from tests.test_memory_injection import add_memory

CLAUDE_CODE_VERSION = "2.1.332"
CLIENTS_DIR = Path(os.environ.get("PAWWAKE_CLIENTS_DIR")
                   or Path.home() / ".cache" / "pawwake-clients")
UUID_LIKE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
CLAUDE = CLIENTS_DIR / "node_modules" / ".bin" / "claude"


@pytest.mark.skipif(not CLAUDE.exists(), reason=(
    f"Claude Code CLI not installed at {CLAUDE}: run `npm install --prefix {CLIENTS_DIR} "
    f"@anthropic-ai/claude-code@{CLAUDE_CODE_VERSION}` (as .ci/run does)"))
async def test_claude_code_headless_through_the_gateway(
        gateway: Any, anthropic_upstream: FakeAnthropic, tmp_path: Path) -> None:  # noqa: F811
    client = await start_gateway(gateway, anthropic_upstream, **MEMORY_ON)
    await add_memory(client, "用户的猫叫小橘")
    anthropic_upstream.reply_text("小橘是一只橘猫。")
    home = tmp_path / "home"
    home.mkdir()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
           "ANTHROPIC_BASE_URL": str(client.make_url("")).rstrip("/"),
           "ANTHROPIC_AUTH_TOKEN": GATEWAY_KEY,
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1",
           "DISABLE_AUTOUPDATER": "1"}
    process = await asyncio.create_subprocess_exec(
        str(CLAUDE), "-p", "小橘是谁？", "--model", "claude-sonnet-4-5", cwd=str(home), env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(process.communicate(), 120)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 0, err.decode(errors="replace")[-2000:]
    assert "小橘是一只橘猫。" in out.decode()
    main = [r for r in anthropic_upstream.requests
            if r.path == "/v1/messages" and "小橘是谁" in str(r.body["messages"])]
    assert main, [r.path for r in anthropic_upstream.requests]
    sent = main[-1]
    assert "用户的猫叫小橘" in str(sent.body["system"])  # the memory reached the provider
    assert GATEWAY_KEY not in str(sent.headers)
    await settle(client)
    rows = await stored_messages(client)
    session = rows[-1]["session_id"]
    assert UUID_LIKE.fullmatch(session), session  # Claude Code's own id, not a derived one
    assert session == json.loads(sent.body["metadata"]["user_id"])["session_id"]
    assert [r["role"] for r in rows][-2:] == ["user", "assistant"]
    assert rows[-1]["content"] == "小橘是一只橘猫。"
    assert "小橘是谁？" in rows[-2]["content"]
