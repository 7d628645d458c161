"""The real Codex CLI, headless (``codex exec``), through the gateway's /v1/responses to a
fake Responses-format provider, offline in a throwaway HOME."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from tests.client_install import npm_cli
from tests.fake_responses import FakeResponses
from tests.fake_upstream import on_loopback
from tests.gateway_support import GATEWAY_KEY, GatewayStarter, settle, stored_messages
from tests.test_memory_injection import MEMORY_ON, add_memory

# A first run installs the CLI into one shared folder: never from two workers at once.
pytestmark = pytest.mark.xdist_group("npm-clients")

CODEX_PACKAGE = "@openai/codex"
CODEX_VERSION = "0.171.0"
RUN_SECONDS = 180


@pytest.fixture
async def fake(aiohttp_server: Any) -> FakeResponses:
    return await on_loopback(FakeResponses(), aiohttp_server)


def codex_home(tmp_path: Path, gateway_url: str) -> Path:
    home = tmp_path / "codex-home"
    (home / ".codex").mkdir(parents=True)
    (home / ".codex" / "config.toml").write_text(
        'model = "test/model-a"\n'
        'model_provider = "pawwake"\n'
        "[model_providers.pawwake]\n"
        'name = "Pawwake"\n'
        f'base_url = "{gateway_url}"\n'
        'env_key = "PAWWAKE_GATEWAY_KEY"\n'
        'wire_api = "responses"\n', encoding="utf-8")
    return home


async def test_codex_exec_gets_its_reply_and_the_turn_is_stored_under_its_session(
        gateway: GatewayStarter, fake: FakeResponses, tmp_path: Path) -> None:
    codex = npm_cli(CODEX_PACKAGE, CODEX_VERSION, "codex")
    app = gateway.build(GATEWAY_SECRET=GATEWAY_KEY, RESPONSES_BASE_URL=fake.base_url,
                        persona="你是小爪。", **MEMORY_ON)
    seen: list[dict[str, str]] = []  # the headers Codex sent to the gateway

    @web.middleware
    async def record(request: web.Request, handler: Any) -> web.StreamResponse:
        if request.path == "/v1/responses":
            seen.append(dict(request.headers))
        return await handler(request)

    app.middlewares.insert(0, record)
    client = await gateway.start(app)
    await add_memory(client, "用户的猫叫小橘")
    fake.default_text = "小橘一切都好。PAWWAKE-REPLY"
    home = codex_home(tmp_path, str(client.make_url("/v1")))
    work = tmp_path / "work"
    work.mkdir()
    env = {"HOME": str(home), "PATH": os.environ.get("PATH", ""),
           "PAWWAKE_GATEWAY_KEY": GATEWAY_KEY, "NO_COLOR": "1", "RUST_LOG": "error"}
    process = await asyncio.create_subprocess_exec(
        str(codex), "exec", "--skip-git-repo-check", "小橘最近怎么样？", cwd=work, env=env,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(process.communicate(), RUN_SECONDS)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 0, err.decode(errors="replace")[-2000:]
    assert "PAWWAKE-REPLY" in out.decode()
    sent = [r for r in fake.requests if r.path == "/v1/responses"]
    assert sent, "codex never reached the provider through the gateway"
    first = sent[0]
    assert first.headers["Authorization"] == "Bearer sk-upstream-test-key-0123456789"
    assert "你是小爪。" in first.body["instructions"]
    assert "用户的猫叫小橘" in first.body["instructions"]
    session = seen[0]["session-id"]
    assert session and seen[0]["Authorization"] == f"Bearer {GATEWAY_KEY}"
    await settle(client)
    rows = await stored_messages(client)
    assert [(r["role"], r["content"]) for r in rows] == [
        ("user", "小橘最近怎么样？"), ("assistant", "小橘一切都好。PAWWAKE-REPLY")]
    assert {r["session_id"] for r in rows} == {session}
    assert rows[0]["metadata"]["protocol"] == "responses"
