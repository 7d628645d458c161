"""Logical rounds over stored and client histories."""

from __future__ import annotations

from pawwake.text.rounds import (
    content_text,
    count_complete_rounds,
    dialogue_text,
    group_rounds,
)


def user(text: str) -> dict:
    return {"role": "user", "content": text}


def assistant(text: str = "", calls: list[str] | None = None) -> dict:
    message: dict = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [{"id": c, "type": "function",
                                  "function": {"name": "f", "arguments": "{}"}} for c in calls]
    return message


def tool(call_id: str, text: str = "result") -> dict:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def test_tool_traffic_stays_inside_one_round() -> None:
    history = [user("hi"), assistant("hello"),
               user("weather?"), assistant(calls=["c1", "c2"]), tool("c1"), tool("c2"),
               assistant("sunny")]
    rounds = group_rounds(history)
    assert len(rounds) == 2
    assert [m["role"] for m in rounds[1].messages] == ["user", "assistant", "tool", "tool",
                                                       "assistant"]
    assert all(r.complete for r in rounds)


def test_pending_tool_call_and_user_only_rounds_are_not_complete() -> None:
    history = [user("a"), assistant("b"), user("c"), assistant(calls=["x"])]
    assert count_complete_rounds(history) == 1
    history += [tool("x")]
    assert count_complete_rounds(history) == 1  # result in, final reply still missing
    history += [assistant("done")]
    assert count_complete_rounds(history) == 2
    assert count_complete_rounds([*history, user("only a question")]) == 2


def test_orphan_tool_results_and_leading_messages_are_dropped() -> None:
    history = [assistant("greeting before any user"), tool("nobody"), user("q"),
               tool("stray"), assistant("a")]
    rounds = group_rounds(history)
    assert len(rounds) == 1
    assert [m["role"] for m in rounds[0].messages] == ["user", "assistant"]


def test_tool_calls_read_from_stored_metadata() -> None:
    stored = [user("q"),
              {"role": "assistant", "content": "",
               "metadata": {"tool_calls": [{"id": "m1", "function": {"name": "f"}}]}},
              {"role": "tool", "content": "r", "metadata": {"tool_call_id": "m1"}},
              {"role": "assistant", "content": "final", "metadata": {}}]
    assert count_complete_rounds(stored) == 1
    assert dialogue_text(group_rounds(stored)) == [("user", "q"), ("assistant", "final")]


def test_content_text_joins_text_parts_only() -> None:
    parts = [{"type": "text", "text": "看这张图"},
             {"type": "image_url", "image_url": {"url": "data:image/png;base64,xx"}},
             {"type": "text", "text": "是什么？"}]
    assert content_text(parts) == "看这张图\n是什么？"
    assert content_text(None) == ""
