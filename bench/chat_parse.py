"""What the chat path pays to parse a body: plain ``json.loads`` vs ``parse_chat_json``.

    python bench/chat_parse.py [--rounds 300]

``parse_chat_json`` adds a depth guard (free: it catches the parser's RecursionError) and a
scan of the raw bytes for NUL or lone-surrogate escapes; strings are walked only when that
scan hints at one. Bodies: short and long chats, written as raw UTF-8 (browsers, current
SDKs) and with ASCII escapes (``ensure_ascii``), with and without emoji. Never run by tests.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pawwake.text.json_input import parse_chat_json


def body(turns: int, emoji: bool) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a helpful cat."}]
    for n in range(turns):
        messages.append({"role": "user", "content": f"第{n}轮：今天天气怎么样？我想出去走走。" * 4})
        messages.append({"role": "assistant",
                         "content": ("It is sunny, go for a walk. " + ("😀" if emoji else "")) * 4})
    return {"model": "test/model", "stream": True, "messages": messages}


def per_call(fn: Any, raw: bytes, rounds: int) -> float:
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(rounds):
            fn(raw)
        best = min(best, (time.perf_counter() - start) / rounds)
    return best * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=300)
    rounds = parser.parse_args().rounds
    print(f"{'body':<34}{'bytes':>9}{'json.loads':>12}{'parse_chat':>12}{'extra':>8}")
    for turns in (5, 50, 300):
        for emoji in (False, True):
            for ascii_only in (False, True):
                raw = json.dumps(body(turns, emoji), ensure_ascii=ascii_only).encode()
                plain = per_call(json.loads, raw, rounds)
                ours = per_call(parse_chat_json, raw, rounds)
                name = f"{turns} turns{' emoji' if emoji else ''}" \
                       f"{' ascii-escaped' if ascii_only else ' utf-8'}"
                print(f"{name:<34}{len(raw):>9}{plain:>10.0f}us{ours:>10.0f}us"
                      f"{(ours / plain - 1) * 100:>7.0f}%")


if __name__ == "__main__":
    main()
