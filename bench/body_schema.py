"""The /api schema layer, two ways: our hand-written parsers (``routes/api_body.fields_of``)
against msgspec, on the body of POST /api/memories/check-duplicate.

    python bench/body_schema.py [--rounds 20000]

Prints, for a few bad bodies, the error each way gives a client, then the time to turn raw
bytes into validated fields (valid body, short and 20,000 characters). Needs msgspec
(requirements-dev.txt); never run by the test suite. The outcome is written up in
docs/ARCHITECTURE.md, "Errors and validation".
"""

from __future__ import annotations

import argparse
import json
import sys
import timeit
from pathlib import Path
from typing import Annotated

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pawwake.api_error import ApiError
from pawwake.memory.duplicates import DEFAULT_THRESHOLD
from pawwake.memory.fields import parse_content
from pawwake.routes.api_body import fields_of
from pawwake.routes.memories import DUPLICATE_CHECK
from pawwake.text.json_input import parse_json


class DuplicateCheck(msgspec.Struct, forbid_unknown_fields=True):
    content: Annotated[str, msgspec.Meta(min_length=1, max_length=20_000)]
    threshold: Annotated[float, msgspec.Meta(gt=0, le=1)] = DEFAULT_THRESHOLD


def hand_written(raw: bytes) -> dict:
    return fields_of(parse_json(raw), DUPLICATE_CHECK, {"threshold": DEFAULT_THRESHOLD})


def with_msgspec(raw: bytes) -> DuplicateCheck:
    check = msgspec.json.decode(raw, type=DuplicateCheck)
    check.content = parse_content(check.content)  # storable text, trimmed: still ours
    return check


BAD_BODIES = {
    "content missing": {"threshold": 0.9},
    "content a number": {"content": 5},
    "content blank": {"content": "   "},
    "threshold true": {"content": "x", "threshold": True},
    "threshold 2": {"content": "x", "threshold": 2},
    "unknown field": {"content": "x", "treshold": 0.9},
    "not an object": ["x"],
}


def error_of(parse: object, raw: bytes) -> str:
    try:
        parse(raw)  # type: ignore[operator]
    except ApiError as exc:
        return f"400 {exc.code}: {exc.message}"
    except msgspec.ValidationError as exc:
        return f"msgspec: {exc}"
    return "accepted"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20000)
    args = parser.parse_args()
    for name, body in BAD_BODIES.items():
        raw = json.dumps(body).encode()
        print(f"{name}:\n  ours:    {error_of(hand_written, raw)}\n"
              f"  msgspec: {error_of(with_msgspec, raw)}")
    for label, text in (("short", "我们上周去了海边"), ("20k chars", "海" * 20_000)):
        raw = json.dumps({"content": text, "threshold": 0.8}).encode()
        for name, parse in (("ours", hand_written), ("msgspec", with_msgspec)):
            seconds = timeit.timeit(lambda: parse(raw), number=args.rounds)  # noqa: B023
            print(f"{label:>9} {name:<8} {seconds / args.rounds * 1e6:8.2f} µs per body")


if __name__ == "__main__":
    main()
