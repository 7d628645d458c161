"""Helpers for the chat gateway tests: start the real app with a persona file of the test's
own, wait for after-reply work, read stored rows."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestClient

from pawwake.app import create_app
from pawwake.chat.persona import PersonaFile
from pawwake.db.pool import cursor, fetch_all
from pawwake.services import services_of
from pawwake.settings import Settings

GATEWAY_KEY = "gw-secret-0123456789abcdef"


class GatewayStarter:
    """``await gateway(persona="...", **settings)`` starts the real app for one test.

    The persona file lives in the test's tmp dir (absent unless ``persona`` is given), so the
    repository's own ``system_prompt.txt`` never leaks into a test.
    """

    def __init__(self, aiohttp_client: Any, make_settings: Callable[..., Settings],
                 tmp_path: Path) -> None:
        self._aiohttp_client = aiohttp_client
        self._make_settings = make_settings
        self.persona_path = tmp_path / "persona" / "system_prompt.txt"

    def build(self, *, persona: str | None = None, **overrides: Any) -> Any:
        app = create_app(self._make_settings(**overrides))
        self.persona_path.parent.mkdir(parents=True, exist_ok=True)
        if persona is not None:
            self.persona_path.write_text(persona, encoding="utf-8")
        services_of(app).chat.persona = PersonaFile(self.persona_path)
        return app

    async def start(self, app: Any) -> TestClient:
        return await self._aiohttp_client(app)

    async def __call__(self, *, persona: str | None = None, **overrides: Any) -> TestClient:
        return await self.start(self.build(persona=persona, **overrides))


async def settle(client: TestClient) -> None:
    """Wait until the after-reply work (storage, usage) has finished."""
    await services_of(client.server.app).tasks.drain()


async def stored_messages(client: TestClient, session_id: str | None = None
                          ) -> list[dict[str, Any]]:
    pool = services_of(client.server.app).database.pool
    sql = ("SELECT id, session_id, role, content, model, metadata FROM conversations"
           " WHERE deleted_at IS NULL")
    params: tuple[Any, ...] = ()
    if session_id is not None:
        sql += " AND session_id = %s"
        params = (session_id,)
    async with cursor(pool) as cur:
        return await fetch_all(cur, sql + " ORDER BY created_at, id", params)


async def usage_rows(client: TestClient) -> list[dict[str, Any]]:
    async with cursor(services_of(client.server.app).database.pool) as cur:
        return await fetch_all(cur,
                               "SELECT session_id, model, prompt_tokens, completion_tokens,"
                               " total_tokens, cached_tokens, usage_type FROM token_usage ORDER BY id")


def chat_body(text: str = "你好", *, stream: bool = False, **extra: Any) -> dict[str, Any]:
    return {"model": "test/model-a", "stream": stream,
            "messages": [{"role": "user", "content": text}], **extra}
