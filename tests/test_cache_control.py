"""cache_control reaches Claude models only; other providers get plain string contents."""

from __future__ import annotations

from typing import Any

from pawwake.chat.cache_control import strip_cache_control, supports_cache_control
from tests.gateway_support import chat_body

MARKED = [
    {"role": "system", "content": [{"type": "text", "text": "persona",
                                    "cache_control": {"type": "ephemeral"}}]},
    {"role": "user", "content": [
        {"type": "text", "text": "看图", "cache_control": {"type": "ephemeral", "ttl": "1h"}},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}]},
    {"role": "user", "content": "plain", "cache_control": {"type": "ephemeral"}},
]


def test_model_names_that_understand_cache_control() -> None:
    assert supports_cache_control("anthropic/claude-sonnet-4.5")
    assert supports_cache_control("claude-3-haiku")
    assert not supports_cache_control("z-ai/glm-4.6")
    assert not supports_cache_control("openai/gpt-5")


def test_strip_removes_every_marker_and_collapses_single_text_blocks() -> None:
    cleaned = strip_cache_control(MARKED)
    assert cleaned[0] == {"role": "system", "content": "persona"}
    assert cleaned[1]["content"] == [
        {"type": "text", "text": "看图"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}]
    assert cleaned[2] == {"role": "user", "content": "plain"}
    assert "cache_control" in MARKED[0]["content"][0]  # the input is left as it was


def test_marked_text_blocks_join_and_unmarked_parts_stay() -> None:
    marked = [{"type": "text", "text": "persona", "cache_control": {"type": "ephemeral"}},
              {"type": "text", "text": "summary"}]
    unmarked = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    cleaned = strip_cache_control([{"role": "system", "content": marked},
                                   {"role": "user", "content": unmarked}])
    assert cleaned == [{"role": "system", "content": "persona\n\nsummary"},
                       {"role": "user", "content": unmarked}]


async def test_gateway_strips_for_other_models_and_keeps_for_claude(gateway: Any,
                                                                     upstream: Any) -> None:
    client = await gateway()
    await client.post("/v1/chat/completions",
                      json=chat_body(model="z-ai/glm-4.6", messages=MARKED))
    assert "cache_control" not in str(upstream.requests[-1].body)
    assert upstream.requests[-1].body["messages"][0]["content"] == "persona"
    await client.post("/v1/chat/completions",
                      json=chat_body(model="anthropic/claude-sonnet-4.5", messages=MARKED))
    sent = upstream.requests[-1].body["messages"]
    assert sent[1]["content"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
