"""A chat request runs on one settings snapshot, the one its first reader took: the CORS
header its response carries and what reaches the model agree even when a dashboard save
lands in between; the save applies from the next request."""

from __future__ import annotations

from typing import Any

import pytest

from pawwake.services import services_of
from pawwake.settings import Settings
from tests.fake_upstream import FakeUpstream
from tests.gateway_support import GATEWAY_KEY, GatewayStarter, settle

WEB_APP = "https://chat.example.com"
HEADERS = {"Origin": WEB_APP, "X-Gateway-Key": GATEWAY_KEY}
SAVED = {"DEFAULT_MODEL": "test/saved-meanwhile", "CORS_ALLOW_ORIGINS": "https://other.example"}


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/models"])
async def test_a_save_landing_after_the_first_read_waits_for_the_next_request(
        gateway: GatewayStarter, upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch,
        path: str) -> None:
    client = await gateway(GATEWAY_SECRET=GATEWAY_KEY, DEFAULT_MODEL="test/first",
                           CORS_ALLOW_ORIGINS="*")
    config = services_of(client.server.app).config
    read = config.fresh
    saves = []

    async def read_then_a_save_lands() -> Settings:
        settings = await read()
        if not saves:  # another tab saves right after this request's first read
            saves.append(await config.update(SAVED))
        return settings

    monkeypatch.setattr(config, "fresh", read_then_a_save_lands)

    async def seen() -> tuple[str | None, str]:
        """(the CORS header of the answer, the model the request ran with)."""
        if path == "/v1/models":
            response = await client.get(path, headers=HEADERS)
            model = (await response.json())["data"][0]["id"]
        else:
            upstream.reply_text("好的")
            body: dict[str, Any] = {"messages": [{"role": "user", "content": "你好"}]}
            response = await client.post(path, json=body, headers=HEADERS)
            await response.read()
            await settle(client)
            model = upstream.requests[-1].body["model"]
        assert response.status == 200
        return response.headers.get("Access-Control-Allow-Origin"), model

    assert await seen() == ("*", "test/first")
    assert saves
    assert await seen() == (None, "test/saved-meanwhile")
