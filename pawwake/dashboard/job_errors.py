"""Background job errors in the reader's words: the stored text (English, written for logs and
the API) is matched to one of a few kinds, worded in the dashboard's strings, and the page
keeps the original behind a toggle. Matching is by meaning, not by exact sentence, so an error
worded a little differently still lands in its kind, and an unknown one still reads as a
sentence ("the job stopped with an error") with the original beside it."""

from __future__ import annotations

import re
from dataclasses import dataclass

# Whose call failed, by what the message names; a strings key under "job_error_who.".
_WHO = (("memory model", "memory"), ("summary model", "summary"), ("embedding", "embedding"))
_STATUS = re.compile(r"\b(?:answered|answering|status|HTTP)\s+(?:HTTP\s+)?([1-5]\d\d)\b")
_EXCEPTION = re.compile(r"^([A-Z]\w*(?:Error|Exception|Timeout|Unreachable|Failure)):")

# (kind, pattern), first match wins; a kind is a strings key under "job_error.".
_KINDS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(pattern, re.IGNORECASE)) for kind, pattern in (
        ("rate_limited", r"rate.?limit|\b429\b"),
        ("truncated", r"truncated|MEMORY_MAX_TOKENS"),
        ("database", r"OperationalError|InterfaceError|psycopg|database|server closed the"
                     r" connection"),
        ("unreachable", r"unreachable|timed? ?out|Timeout|could not reach|ClientConnector"
                        r"|connection (?:refused|reset)"),
        ("upstream_status", r"\banswered (?:HTTP )?[1-5]\d\d\b|\bstatus [1-5]\d\d\b"),
        ("bad_answer", r"unusable|malformed|nonsense|not valid JSON|without one vector"
                       r"|could not be parsed|Expecting value"),
        ("settings_changed", r"settings changed|changed its answer size"),
        ("taken_over", r"taken over"),
        ("interrupted", r"stopped before it finished"),
    ))


@dataclass(frozen=True)
class JobErrorView:
    """What the page shows: a sentence (``kind`` and the values it names) and the stored
    text."""

    kind: str
    who: str  # whose call failed
    status: str  # an HTTP status the text names
    name: str  # the exception's name, for errors of no known kind
    raw: str


def explain_job_error(raw: str | None, who: str | None = None) -> JobErrorView | None:
    """The kind of a stored job error and the values its sentence names (None for none);
    ``who`` names the caller when the page knows it better than the text."""
    if not raw or not raw.strip():
        return None
    text = raw.strip()
    lowered = text.lower()
    who = who or next((name for start, name in _WHO if start in lowered), "provider")
    kind = next((name for name, pattern in _KINDS if pattern.search(text)), "other")
    status = _STATUS.search(text)
    exception = _EXCEPTION.match(text)
    if kind == "other" and exception:
        kind = "exception"
    return JobErrorView(kind, who, status.group(1) if status else "",
                        exception.group(1) if exception else "", text)
