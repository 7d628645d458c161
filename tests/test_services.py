"""The Services object: one accessor from the root app and its sub-apps, and one settings
snapshot per request."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aiohttp import web

from pawwake.app_faces import settings_of
from pawwake.chat.memory_step import memories
from pawwake.chat.persona import DEFAULT_PERSONA_PATH
from pawwake.database import require_database
from pawwake.db.errors import DatabaseUnavailable
from pawwake.partition.step import partition_context
from pawwake.recall.inject import recalled_fragments
from pawwake.search.term_stats import CONVERSATIONS, MEMORIES
from pawwake.services import Services, build_services, install_faces, services_of
from pawwake.settings import Settings


def _services(tmp_path: Path, **values: Any) -> Services:
    return build_services(Settings.from_env({"PAWWAKE_DATA_DIR": str(tmp_path)}, **values))


async def test_a_sub_app_handler_reaches_the_root_apps_services(aiohttp_client: Any,
                                                                tmp_path: Path) -> None:
    services = _services(tmp_path, DATABASE_ENABLED=False)
    root = web.Application()
    install_faces(root, services)
    api = web.Application()

    async def who(request: web.Request) -> web.Response:
        return web.json_response({"same": services_of(request) is services,
                                  "root": services_of(request.match_info.apps[0]) is services})

    api.router.add_get("/who", who)
    root.add_subapp("/api", api)
    client = await aiohttp_client(root)
    response = await client.get("/api/who")
    assert await response.json() == {"same": True, "root": True}


async def test_a_request_keeps_the_settings_it_read_first(aiohttp_client: Any,
                                                          tmp_path: Path) -> None:
    """A save in the middle of a request applies from the next request on, never half-way."""
    services = _services(tmp_path, DATABASE_ENABLED=False, MEMORY_ENABLED=True)
    app = web.Application()
    install_faces(app, services)

    async def read_twice(request: web.Request) -> web.Response:
        before = await settings_of(request)
        await services.config.update({"MEMORY_ENABLED": not before.MEMORY_ENABLED})
        after = await settings_of(request)
        return web.json_response({"before": before.MEMORY_ENABLED,
                                  "after": after.MEMORY_ENABLED})

    app.router.add_get("/", read_twice)
    client = await aiohttp_client(app)
    assert await (await client.get("/")).json() == {"before": True, "after": True}
    assert await (await client.get("/")).json() == {"before": False, "after": False}


def test_without_a_database_the_guard_is_the_503_error(tmp_path: Path) -> None:
    services = _services(tmp_path, DATABASE_ENABLED=False)
    assert services.database is None
    try:
        require_database(services.database)
    except DatabaseUnavailable as exc:
        assert exc.code == "database_disabled"
        assert "DATABASE_ENABLED=false" in str(exc)
    else:
        raise AssertionError("require_database let a missing database through")
    try:
        require_database(services.database, "database_unavailable")
    except DatabaseUnavailable as exc:
        assert exc.code == "database_unavailable"


def test_the_http_client_is_asked_for_only_once_it_is_open(tmp_path: Path) -> None:
    services = _services(tmp_path, DATABASE_ENABLED=False)
    try:
        services.client.session  # noqa: B018
    except RuntimeError as exc:
        assert "not open" in str(exc)
    else:
        raise AssertionError("an unopened HTTP client was handed out")


def test_each_app_gets_its_own_chat_resources_with_the_declared_steps(tmp_path: Path) -> None:
    """The persona file, the steps, the clock and the stores in flight are one typed field;
    two apps in one process never wait on each other's stores."""
    services = _services(tmp_path, DATABASE_ENABLED=False)
    other = _services(tmp_path, DATABASE_ENABLED=False)
    assert [step.run for step in services.chat.steps] == [partition_context, memories,
                                                          recalled_fragments]
    assert services.chat.steps[1].face.search is services.memory_search
    assert other.chat.steps[1].face.search is other.memory_search
    assert services.chat.persona.path == DEFAULT_PERSONA_PATH
    assert services.chat.pending == {} and services.chat.pending is not other.chat.pending


def test_memory_search_and_recall_share_the_assemblys_search_parts(tmp_path: Path) -> None:
    """One vector backend for both stores; term statistics per collection, built with the
    app (not kept per module), each handed to the feature that searches that collection."""
    services = _services(tmp_path)
    assert services.recall.vectors is services.memory_search.vectors is services.vectors
    assert services.memory_search.term_stats.collection is MEMORIES
    assert services.recall.term_stats.collection is CONVERSATIONS
    assert services.recall.term_stats is services.message_term_stats
    other = _services(tmp_path)
    assert other.recall.term_stats is not services.recall.term_stats
    assert other.vectors is not services.vectors
