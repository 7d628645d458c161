"""How a chat turn ends, decided in one place for every protocol and for the try-it page.

A turn ends one of three ways. Its reply finished: the success hooks run (reminders delivered,
the turn stored, memories touched). The client left, or a shutdown cut it, after the request
was forwarded: the failure hooks release what the steps claimed, and what the client typed,
with the part of the reply it saw, is kept as an incomplete turn. Otherwise it failed: the
failure hooks only. ``TurnEnd`` says which; ``end_turn`` starts that after-work and tells the
provider's health what the end showed of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pawwake.chat.pipeline import after_failure, after_incomplete, after_reply
from pawwake.chat.prepared import PreparedChat
from pawwake.llm.sse import CapturedReply
from pawwake.llm.upstream_health import UpstreamHealth

if TYPE_CHECKING:
    from pawwake.chat.resources import ChatFlow

CLIENT_GONE = 499  # only ever logged: nobody is left to receive it
# Ends that say nothing about the provider: the client left, or the gateway stopped.
NOT_THE_PROVIDER = frozenset({"client_gone", "shutdown"})


@dataclass(frozen=True)
class TurnEnd:
    """How one turn ended.

    ``failure`` is None for a finished reply, else why there is none ("client_gone",
    "shutdown", "upstream_cut", an ``UpstreamFailure`` code...); ``reply`` is the whole reply,
    or with a failure the part the client saw (the turn is then kept as incomplete);
    ``status`` is what the request's log line and the provider's health read; ``noted`` is
    False for an end the provider's health learns nothing from (a cancelled turn).
    """

    reply: CapturedReply | None = None
    failure: str | None = None
    status: int = 200
    noted: bool = True

    @property
    def incomplete(self) -> bool:
        return self.failure is not None and self.reply is not None


def finished(reply: CapturedReply, *, status: int = 200, noted: bool = True) -> TurnEnd:
    return TurnEnd(reply, None, status, noted)


def incomplete(partial: CapturedReply, reason: str, *, status: int = CLIENT_GONE) -> TurnEnd:
    return TurnEnd(partial, reason, status)


def failed(reason: str, *, status: int = 200, noted: bool = True) -> TurnEnd:
    return TurnEnd(None, reason, status, noted)


def end_turn(flow: ChatFlow, prepared: PreparedChat | None, end: TurnEnd, *,
             health: UpstreamHealth | None) -> None:
    """Start the turn's after-work for ``end`` (tracked tasks) and, given ``health``, note
    what it showed of the provider. Called once per turn."""
    if health is not None and end.noted:
        if end.failure is None:
            health.succeeded()
        elif end.failure not in NOT_THE_PROVIDER:
            health.failed(end.status, prepared.model if prepared else "", end.failure)
    if prepared is None:
        return
    if end.failure is None:
        assert end.reply is not None
        after_reply(flow.tasks, prepared, end.reply)
    elif end.reply is not None:
        after_incomplete(flow, prepared, end.reply, end.failure)
    else:
        after_failure(flow.tasks, prepared, end.failure)
