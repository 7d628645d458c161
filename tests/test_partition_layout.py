"""The pure layout: breakpoint placement without a persona, empty replies, message order."""

from __future__ import annotations

from pawwake.chat.partition import assemble
from pawwake.chat.rounds import group_rounds

CC = {"type": "ephemeral"}


def rows(*pairs: tuple[str, str]) -> list[dict]:
    return [{"id": n, "role": role, "content": text, "metadata": {}}
            for n, (role, text) in enumerate(pairs, 1)]


def test_no_persona_and_no_summary_means_no_system_message() -> None:
    history = group_rounds(rows(("user", "q1"), ("assistant", "r1")))
    messages, layout = assemble(persona="", summary_parts=[], history=history,
                                current=[{"role": "user", "content": "q2"}], x=2, ttl="5m",
                                note="[T]")
    assert messages == [{"role": "user", "content": "q1"},
                        {"role": "assistant", "content": "r1"},
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
        {"role": "user", "content": "q1"}, {"role": "assistant", "content": "r1"},
        {"role": "user", "content": [{"type": "text", "text": "q2", "cache_control": marker}]},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": "q3"}]
