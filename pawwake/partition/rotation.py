"""When and how the partition zones rotate (``rounds`` or ``time`` trigger).

When zone B holds X rounds, zone A is summarised with CACHE_SUMMARY_MODEL (empty: slide
without a summary), the summary becomes a new part and B becomes A. Past
CACHE_SUMMARY_BUDGET_CHARS the oldest parts are folded into one base part. A failed summary
(or a failed or no shorter fold) cancels the rotation, and the next request tries again;
meanwhile the live history is capped at HISTORY_CAP_FACTOR * X rounds by sliding without a
summary, so a broken summary model cannot grow the prompt without bound. The last failure
is kept on the state for the threads and status pages.

A thread whose live history is longer than any rotation leaves it (stored before partition
mode was switched on, imported, or X lowered) is never read whole: it jumps in one step to
the newest X rounds (see ``catch_up``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import aiohttp

from pawwake.db.partition_state import PartitionState
from pawwake.llm.upstream import UsageBooking, complete
from pawwake.settings import Settings
from pawwake.text.messages import ChatMessage
from pawwake.text.rounds import StoredRound, dialogue_text

log = logging.getLogger(__name__)

HISTORY_CAP_FACTOR = 3
_MAX_ERROR_CHARS = 300

Summariser = Callable[[Sequence[StoredRound]], Awaitable[str]]
Folder = Callable[[Sequence[str]], Awaitable[str]]
KEPT_OLDER_PARTS = 2  # older parts kept verbatim by a fold, besides the new part

FOLD_INSTRUCTIONS = (
    "Merge the conversation summaries below, oldest first, into one shorter base summary. "
    "Keep facts, decisions, open tasks, names, numbers and the user's preferences. Write in "
    "the language the summaries use. Output only the merged summary.")

SUMMARY_INSTRUCTIONS = (
    "Summarise the conversation below for your own later reference. Keep facts, decisions, "
    "open tasks, names, numbers and the user's preferences; drop small talk. Write in the "
    "language the conversation uses. Output only the summary.")


def summary_prompt(rounds: Sequence[StoredRound]) -> list[ChatMessage]:
    lines = [f"{role}: {text}" for role, text in dialogue_text(rounds)]
    return [{"role": "system", "content": SUMMARY_INSTRUCTIONS},
            {"role": "user", "content": "\n\n".join(lines)}]


def model_summariser(http: aiohttp.ClientSession, settings: Settings,
                     usage: UsageBooking | None = None) -> Summariser:
    """Summaries through the configured upstream with CACHE_SUMMARY_MODEL; ``usage`` books
    every call's tokens (a summary that is then refused included)."""

    async def summarise(rounds: Sequence[StoredRound]) -> str:
        reply = await complete(http, settings, summary_prompt(rounds),
                               model=settings.CACHE_SUMMARY_MODEL,
                               max_tokens=settings.CACHE_SUMMARY_MAX_TOKENS, attempts=1,
                               usage=usage)
        text = reply.text.strip()
        if not text:
            raise ValueError("the summary model returned no text")
        if reply.truncated:
            raise ValueError("the summary was cut at CACHE_SUMMARY_MAX_TOKENS")
        return text

    return summarise


def model_folder(http: aiohttp.ClientSession, settings: Settings,
                 usage: UsageBooking | None = None) -> Folder:
    """Folds old summary parts into one base part with CACHE_SUMMARY_MODEL (tokens booked
    like summaries)."""

    async def fold(parts: Sequence[str]) -> str:
        prompt: list[ChatMessage] = [{"role": "system", "content": FOLD_INSTRUCTIONS},
                                     {"role": "user",
                                      "content": "\n\n---\n\n".join(parts)}]
        reply = await complete(http, settings, prompt, model=settings.CACHE_SUMMARY_MODEL,
                               max_tokens=settings.CACHE_SUMMARY_MAX_TOKENS, attempts=1,
                               usage=usage)
        text = reply.text.strip()
        if not text or reply.truncated:
            raise ValueError("the fold returned no complete text")
        return text

    return fold


async def folded_parts(parts: list[str], budget: int, fold: Folder) -> list[str]:
    """``parts`` within ``budget`` characters: the oldest parts merged into one base part, the
    2 newest older parts and the new part kept verbatim. Raises when the fold fails or comes
    back no shorter than what it replaces (the caller cancels the rotation)."""
    if budget <= 0 or sum(len(p) for p in parts) <= budget:
        return parts
    keep = KEPT_OLDER_PARTS + 1
    older, kept = parts[:-keep], parts[-keep:]
    if not older:
        return parts
    base = await fold(older)
    if len(base) >= sum(len(p) for p in older):
        raise ValueError("the fold came back no shorter than the parts it merges")
    return [base, *kept]


def _slide(state: PartitionState, history: Sequence[StoredRound], x: int, **changes: Any
           ) -> PartitionState:
    start = history[x].messages[0]["id"]
    return replace(state, zone_start_message_id=start, rotations=state.rotations + 1,
                   **changes)


def _describe(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return text[:_MAX_ERROR_CHARS]


def rotation_due(history: Sequence[StoredRound], x: int, settings: Settings, now: datetime) -> bool:
    """Zone B holds X rounds; with the ``time`` trigger zone A's newest message must also be
    older than CACHE_PARTITION_WINDOW minutes (unless the history is over its cap)."""
    if len(history) < 2 * x:
        return False
    if settings.CACHE_PARTITION_TRIGGER != "time" or len(history) > HISTORY_CAP_FACTOR * x:
        return True
    newest = max(m["created_at"] for r in history[:x] for m in r.messages)
    return bool(newest < now - timedelta(minutes=int(settings.CACHE_PARTITION_WINDOW)))


def rotations_allowed(settings: Settings) -> int:
    """Rotations one request may make: several can be due after a quiet time window."""
    if settings.CACHE_PARTITION_TRIGGER == "time":
        return max(1, int(settings.CACHE_MAX_ROTATIONS))
    return 1


async def rotate(state: PartitionState, history: Sequence[StoredRound], settings: Settings,
                 summarise: Summariser, now: datetime, fold: Folder | None = None
                 ) -> PartitionState | None:
    """The new state after at most one rotation, or None when nothing changes.

    ``history`` are the settled live rounds (an in-progress tool round is not among them).
    """
    x = max(1, int(settings.CACHE_PARTITION_X))
    if not rotation_due(history, x, settings, now):
        return None
    over_cap = len(history) > HISTORY_CAP_FACTOR * x
    if not settings.CACHE_SUMMARY_MODEL:
        return _slide(state, history, x, last_summary_error=None)
    try:
        summary = await summarise(history[:x])
        parts = [*state.summary_parts, summary]
        if fold is not None:
            parts = await folded_parts(parts, int(settings.CACHE_SUMMARY_BUDGET_CHARS),
                                       fold)
    except Exception as exc:  # summary or fold failed: cancelled; the next request retries
        error = _describe(exc)
        log.warning("partition summary failed (the next request retries): %s", error)
        failed = replace(state, last_summary_error=error)
        if over_cap:
            log.warning("partition history over its cap; sliding without a summary")
            return _slide(failed, history, x)
        return failed
    return _slide(state, history, x, summary_parts=parts, last_summary_error=None)


def live_round_limit(x: int) -> int:
    """Rounds a request reads at most. Rotations keep the live history at or under
    HISTORY_CAP_FACTOR * X + 1 settled rounds (the cap slides past 3X at the latest), plus
    the current tool round; a thread with more is over its bounds and catches up."""
    return HISTORY_CAP_FACTOR * max(1, x) + 2


async def catch_up(state: PartitionState, history: Sequence[StoredRound], settings: Settings,
                   summarise: Summariser, fold: Folder | None = None
                   ) -> tuple[PartitionState, list[StoredRound]]:
    """(new state, live history) for a thread read past ``live_round_limit``: the zone start
    jumps to the newest X settled rounds, as if one rotation had just happened.

    Only the X rounds just before them (what that rotation would have summarised) go to
    CACHE_SUMMARY_MODEL, once; older rounds slide out without a summary, since summarising
    a whole imported history in one call is neither affordable nor bounded. Those rounds
    stay stored and reachable through conversation recall. A failed summary does not stop
    the jump: it is recorded like any other.
    """
    x = max(1, int(settings.CACHE_PARTITION_X))
    if len(history) <= x:
        return state, list(history)
    kept, sliding = list(history[-x:]), history[-2 * x:-x]
    changes: dict[str, Any] = {"last_summary_error": None}
    if settings.CACHE_SUMMARY_MODEL:
        try:
            parts = [*state.summary_parts, await summarise(sliding)]
            if fold is not None:
                parts = await folded_parts(parts, int(settings.CACHE_SUMMARY_BUDGET_CHARS),
                                           fold)
            changes["summary_parts"] = parts
        except Exception as exc:  # the jump still happens; the failure is shown
            changes = {"last_summary_error": _describe(exc)}
            log.warning("partition catch-up summary failed: %s", changes["last_summary_error"])
    log.info("partition thread over its bounds: live history jumps to the newest %d rounds", x)
    return replace(state, zone_start_message_id=kept[0].messages[0]["id"],
                   rotations=state.rotations + 1, **changes), kept
