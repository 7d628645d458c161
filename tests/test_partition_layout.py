"""The pure layout: breakpoint placement without a persona, empty replies, message order, and
one stable form per history message (Claude) or plain strings (other models)."""

from __future__ import annotations

import json
from typing import Any

from pawwake.chat.cache_control import strip_cache_control
from pawwake.partition.layout import assemble
from pawwake.text.rounds import group_rounds

CC = {"type": "ephemeral"}
CALL = {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}


def rows(*pairs: tuple[str, str], start: int = 1) -> list[dict]:
    return [{"id": n, "role": role, "content": text, "metadata": {}}
            for n, (role, text) in enumerate(pairs, start)]


def block(text: str, marker: dict[str, str] | None = None) -> list[dict[str, Any]]:
    part: dict[str, Any] = {"type": "text", "text": text}
    if marker is not None:
        part["cache_control"] = marker
    return [part]


def tool_round_rows(first_id: int, n: int, *, answered: bool = True) -> list[dict]:
    """user, assistant tool call (null content), tool result and (when ``answered``) the
    final reply."""
    call = {**CALL, "id": f"call_{n}"}
    out = [{"id": first_id, "role": "user", "content": f"q{n}", "metadata": {}},
           {"id": first_id + 1, "role": "assistant", "content": None,
            "metadata": {"tool_calls": [call]}},
           {"id": first_id + 2, "role": "tool", "content": f"result {n}",
            "metadata": {"tool_call_id": call["id"], "name": "lookup"}}]
    if answered:
        out.append({"id": first_id + 3, "role": "assistant", "content": f"r{n}",
                    "metadata": {}})
    return out


def unmarked_json(messages: list[dict[str, Any]]) -> str:
    """The serialised messages with only the ``cache_control`` keys taken out (form kept)."""
    def clean(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items() if k != "cache_control"}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value
    return json.dumps(clean(messages), ensure_ascii=False)


def test_no_persona_and_no_summary_means_no_system_message() -> None:
    history = group_rounds(rows(("user", "q1"), ("assistant", "r1")))
    messages, layout = assemble(persona="", summary_parts=[], history=history,
                                current=[{"role": "user", "content": "q2"}], x=2, ttl="5m",
                                note="[T]")
    assert messages == [{"role": "user", "content": block("q1")},
                        {"role": "assistant", "content": block("r1")},
                        {"role": "user", "content": "[T]\n\nq2"}]
    assert (layout.zone_a_rounds, layout.zone_b_rounds) == (0, 1)


def test_summary_without_persona_and_an_empty_reply_moves_the_breakpoint_back() -> None:
    history = group_rounds(rows(("user", "q1"), ("assistant", "r1"), ("user", "q2"),
                                ("assistant", "")))
    messages, _ = assemble(persona="", summary_parts=["s1", "  "], history=history,
                           current=[{"role": "user", "content": "q3"}], x=2, ttl="1h")
    marker = {**CC, "ttl": "1h"}
    assert messages == [
        {"role": "system", "content": [{"type": "text", "cache_control": marker,
                                        "text": "Summary of the earlier conversation:\ns1"}]},
        {"role": "user", "content": block("q1")}, {"role": "assistant", "content": block("r1")},
        {"role": "user", "content": block("q2", marker)},
        {"role": "assistant", "content": ""},  # no empty text block: providers reject those
        {"role": "user", "content": "q3"}]


def test_tool_calls_keep_null_content_and_a_round_ending_in_a_tool_result_holds_the_mark(
        ) -> None:
    history = group_rounds(tool_round_rows(1, 1) + tool_round_rows(5, 2, answered=False))
    messages, _ = assemble(persona="P", summary_parts=[], history=history,
                           current=[{"role": "user", "content": "q3"}], x=1, ttl="5m")
    assert messages[1:] == [
        {"role": "user", "content": block("q1")},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "content": block("result 1"), "tool_call_id": "call_1",
         "name": "lookup"},
        {"role": "assistant", "content": block("r1", CC)},
        {"role": "user", "content": block("q2")},
        {"role": "assistant", "content": None, "tool_calls": [{**CALL, "id": "call_2"}]},
        {"role": "tool", "content": block("result 2", CC), "tool_call_id": "call_2",
         "name": "lookup"},
        {"role": "user", "content": "q3"}]
    assert '"text": ""' not in json.dumps(messages)


def test_every_history_message_keeps_its_bytes_whatever_its_breakpoint() -> None:
    stored = rows(*[(role, f"{role[0]}{n}") for n in range(1, 4)
                    for role in ("user", "assistant")])
    stored += tool_round_rows(len(stored) + 1, 4)
    stored += rows(*[(role, f"{role[0]}{n}") for n in range(5, 9)
                     for role in ("user", "assistant")], start=len(stored) + 1)
    rounds = group_rounds(stored)
    previous: list[dict[str, Any]] | None = None
    for count in range(1, len(rounds) + 1):
        current = [{"role": "user", "content": f"now {count}"}]
        messages, _ = assemble(persona="P", summary_parts=["s1", "s2"],
                               history=rounds[:count], current=current, x=2, ttl="5m",
                               note="[T]")
        if previous is not None:
            cached = unmarked_json(previous[:-1])[:-1]  # up to the end of the previous zone B
            assert unmarked_json(messages).startswith(cached), count
        previous = messages


def test_other_models_get_the_same_layout_as_plain_strings() -> None:
    history = group_rounds(tool_round_rows(1, 1) + rows(
        ("user", "q2"), ("assistant", "r2"), ("user", "q3"), ("assistant", ""), start=5))
    messages, _ = assemble(persona="P", summary_parts=["s1", "s2"], history=history,
                           current=[{"role": "user", "content": "q4"}], x=1, ttl="1h",
                           note="[T]")
    plain = strip_cache_control(messages)
    assert "cache_control" not in json.dumps(plain)
    assert plain[0] == {"role": "system", "content":
                        "P\n\nSummary of the earlier conversation:\ns1\n\ns2"}
    assert [m["content"] for m in plain[1:]] == [
        "q1", None, "result 1", "r1", "q2", "r2", "q3", "", "[T]\n\nq4"]
