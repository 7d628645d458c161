"""CONVERSATION_MIN_SCORE_THRESHOLD is optional like MEMORY_SEMANTIC_THRESHOLD: empty follows
the embedding provider (conversation recall's own floors: chat lines are short), a value
someone saved is used as saved (0.7 stays 0.7 with the local model)."""

from __future__ import annotations

from typing import Any

from pawwake.recall.semantic import DEFAULT_FLOORS, conversation_threshold
from pawwake.services import services_of
from pawwake.settings import BY_NAME, Settings
from tests.dashboard_support import dashboard_client


def test_empty_follows_the_provider_and_a_set_value_is_kept() -> None:
    assert Settings.from_env({})["CONVERSATION_MIN_SCORE_THRESHOLD"] is None
    empty = Settings.from_env({"CONVERSATION_MIN_SCORE_THRESHOLD": ""})
    assert conversation_threshold(empty, "local") == DEFAULT_FLOORS["local"]
    assert conversation_threshold(empty, "api") == DEFAULT_FLOORS["api"]
    chosen = Settings.from_env({"CONVERSATION_MIN_SCORE_THRESHOLD": "0.7"})
    assert conversation_threshold(chosen, "local") == 0.7
    assert conversation_threshold(chosen, "api") == 0.7
    assert BY_NAME["CONVERSATION_MIN_SCORE_THRESHOLD"].kind == "optional_float"


async def test_a_saved_value_is_used_as_saved_and_clearing_it_restores_the_default(
        make_client: Any) -> None:
    client = await dashboard_client(make_client, EMBEDDING_PROVIDER="local")
    config = services_of(client.app).config
    response = await client.put("/api/settings", json={"CONVERSATION_MIN_SCORE_THRESHOLD": 0.7})
    assert response.status == 200, await response.text()
    assert conversation_threshold(await config.fresh(), "local") == 0.7

    restarted = await make_client(EMBEDDING_PROVIDER="local")  # same database, new process
    assert conversation_threshold(services_of(restarted.app).config.current(), "local") == 0.7

    response = await client.put("/api/settings", json={"CONVERSATION_MIN_SCORE_THRESHOLD": ""})
    assert response.status == 200, await response.text()
    assert conversation_threshold(await config.fresh(), "local") == DEFAULT_FLOORS["local"]
