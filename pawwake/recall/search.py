"""Conversation recall: find past conversations in their own words, as stable fragments.

Candidates are messages: those sharing a keyword (GIN-indexed terms) and the ``NEAREST``
messages to the query's vector (``recall.semantic``); each gets both kinds of evidence, so
``recall.rank`` scores every message on its own and ranks sessions by their best messages.
Each chosen session gives one fragment: its best messages as the matched ones, with
``context`` neighbours on each side. A date the question names (``recall.when``) is a part of
the score and leaves both the keywords and the text sent to the embedding model; words common
to many sessions weigh half as keywords (``common_terms``), and those of them that name one of
the two people are kept from the embedding model (``names``).
Stateless: callers pass the sessions and fragment ids to leave out (the next candidates move
up).
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pawwake.database import require_database
from pawwake.db import fragments as db
from pawwake.db.pool import cursor
from pawwake.local_time import zone_of
from pawwake.recall import index as conversation_index
from pawwake.recall import when
from pawwake.recall.fragments import Fragment, FragmentMessage
from pawwake.recall.rank import (
    CONTEXT_CHARS,
    MATCH_CHARS,
    MessageHit,
    Question,
    RankedSession,
    Weights,
    fragment_id,
    rank_sessions,
    trim,
)
from pawwake.recall.semantic import SemanticOutcome, add_semantic_evidence, add_time_words
from pawwake.search.scoring import keyword_score
from pawwake.search.term_stats import Counts, KeywordPlan
from pawwake.settings import Settings
from pawwake.text import english, offload, tokens
from pawwake.text.query import embedding_text, nothing_to_search

if TYPE_CHECKING:
    from pawwake.recall.faces import ConversationRecall
    from pawwake.settings import Settings

log = logging.getLogger(__name__)

KEYWORD_ROWS = 1000
COMMON_SESSION_SHARE = 0.2  # a keyword in this share of sessions is not sent to the model
COMMON_MIN_SESSIONS = 10  # ... once there are this many sessions to tell
COMMON_KEYWORD_WEIGHT = 0.5  # ... and keeps half its IDF weight as a keyword
NAMED_SHARE = 0.9  # of a common keyword's messages written by one side: it names the other
ADDRESSED = {"user": "assistant", "assistant": "user"}  # who a side's lines address
CATCH_UP_LIMIT = 2000  # messages indexed on the search path when a writer left them bare


@dataclass
class RecallOutcome:
    fragments: list[Fragment]
    mode: str  # "hybrid" | "keyword"
    keywords: list[str]
    warning: str | None = None
    threshold: float | None = None
    candidates: int = 0
    extras: dict[str, Any] = field(default_factory=dict)


async def search_fragments(recall: ConversationRecall, query: str, *, max_sessions: int = 3,
                           context: int = 1, mode: str = "hybrid",
                           exclude_session_ids: Iterable[str] = (),
                           exclude_fragment_ids: Iterable[str] = (),
                           keep_excluded_below: int = 0,
                           settings: Settings, now: datetime | None = None) -> RecallOutcome:
    """Search stored conversations for ``query``; see the module docstring.

    ``keep_excluded_below``: messages of excluded sessions before this message (in
    (created_at, id) order) stay searchable: the current thread's history that slid out of
    the live zones. ``now``: the moment recency and dates without a year are measured from."""
    database = require_database(recall.database)
    now = now or datetime.now(UTC)
    excluded_sessions = sorted(set(exclude_session_ids))
    excluded_fragments = set(exclude_fragment_ids)
    window = when.find_window(query, zone_of(settings), now)
    asked = when.without(query, window)
    question = Question(window, when.asks_when(query))
    keywords, run_chars = await _keywords(asked)
    hits: dict[int, MessageHit] = {}
    named: set[str] = set()

    if keywords:
        plan, found = await _keyword_side(recall, keywords, excluded_sessions,
                                          keep_below=keep_excluded_below)
        if found.bare and await conversation_index.index_pending(recall,
                                                                 limit=CATCH_UP_LIMIT):
            plan, found = await _keyword_side(recall, keywords, excluded_sessions,
                                              keep_below=keep_excluded_below)
        rows = found.rows
        frequencies = {**found.counts, **recall.term_stats.estimated(keywords)}
        common = common_terms(rows, keywords, plan.sessions)
        sides = one_sided(rows, common)
        named = names(common, sides, run_chars)
        question = replace(question, speaker=named_speaker(sides))
        weights = {t: tokens.idf_weight(plan.collection, frequencies.get(t, 0))
                   * (COMMON_KEYWORD_WEIGHT if t in common else 1.0) for t in keywords}
        total = sum(weights.values())
        for row in rows:
            present = set(row["search_terms"] or ())
            share = keyword_score(sum(w for t, w in weights.items() if t in present), total)
            hits[row["id"]] = MessageHit(row["id"], row["session_id"], row["created_at"], share,
                                         only_common=bool(common) and
                                         present.intersection(keywords) <= common,
                                         role=row["role"])

    semantic = SemanticOutcome(False)
    if mode == "hybrid":
        semantic = await add_semantic_evidence(
            recall, settings, embedding_text(without_terms(asked, named), keywords), hits,
            excluded_sessions=excluded_sessions, keep_below=keep_excluded_below,
            pool_size=max(20, 3 * max_sessions), asks_when=question.asks_when)
    if question.asks_when and not semantic.used and hits:
        await add_time_words(recall, hits)
    weights_of = Weights(float(settings.CONVERSATION_HW_KEYWORD),
                         float(settings.CONVERSATION_HW_SEMANTIC) if semantic.used else 0.0,
                         float(settings.CONVERSATION_HW_RECENCY))
    ranked = rank_sessions(hits.values(), now=now, weights=weights_of, scale=semantic.scale,
                           question=question)
    chosen = []
    for item in ranked:
        fid = fragment_id(item.matched_ids)
        if fid in excluded_fragments:
            continue
        chosen.append((item, fid))
        if len(chosen) >= max_sessions:
            break
    fragments = await _build_fragments(database.pool, chosen, context)
    return RecallOutcome(fragments=fragments, mode="hybrid" if semantic.used else "keyword",
                         keywords=keywords, warning=semantic.warning,
                         threshold=semantic.threshold, candidates=len(ranked))


async def _keyword_side(recall: ConversationRecall, keywords: list[str],
                        excluded_sessions: list[str], *, keep_below: int
                        ) -> tuple[KeywordPlan, db.KeywordEvidence]:
    """The keyword plan, the matching messages and the document frequencies of the terms the
    statistics do not list (and whether some message still lacks its terms)."""
    database = require_database(recall.database)
    stats = recall.term_stats
    if stats.counted_by_caller():  # a small collection: counted in the statement itself
        async with cursor(database.pool) as cur:
            found = await db.keyword_evidence(
                cur, keywords, excluded_sessions, KEYWORD_ROWS, counted=keywords,
                keep_below=keep_below, totals=True)
        assert found.totals is not None
        size, sessions, rows = found.totals
        plan = stats.plan_counted(keywords, Counts(size, rows, sessions))
        if plan is not None:
            return plan, found
    plan = await stats.plan(database.pool, keywords)
    estimated = stats.estimated(keywords)  # the listed ones; others counted
    async with cursor(database.pool) as cur:
        found = await db.keyword_evidence(
            cur, keywords, excluded_sessions, KEYWORD_ROWS,
            counted=[t for t in keywords if t not in estimated], keep_below=keep_below,
            windowed=plan.windowed, window=plan.window, gather_cap=plan.gather_cap)
    return plan, found


async def _keywords(text: str) -> tuple[list[str], set[str]]:
    """The query's keywords, plus the single characters of names and other words the
    dictionary lacks (index terms hold single characters, so "林晓" is found as 林 + 晓);
    and those characters."""
    keywords, runs = await offload.keywords_and_runs(text)
    chars = [ch for run in runs for ch in run]
    return list(dict.fromkeys([*keywords, *chars])), set(chars)


def common_terms(rows: Sequence[Mapping[str, Any]], keywords: Sequence[str], sessions: int
                 ) -> set[str]:
    """Keywords present in at least ``COMMON_SESSION_SHARE`` of the searchable sessions (among
    the keyword rows, which hold every message with a keyword below the gathering bounds).

    Such a word says who or when rather than what: the two people's names, which greetings
    and good-nights repeat in session after session, or "work" and "day". It counts as a
    keyword at half its IDF weight (on the dev set, half beat full weight and none); the
    names among them are kept from the embedding model (``names``)."""
    if sessions < COMMON_MIN_SESSIONS:
        return set()
    seen: dict[str, set[str]] = {}
    wanted = set(keywords)
    for row in rows:
        for term in wanted.intersection(row["search_terms"] or ()):
            seen.setdefault(term, set()).add(row["session_id"])
    return {t for t, s in seen.items() if len(s) >= COMMON_SESSION_SHARE * sessions}


def one_sided(rows: Sequence[Mapping[str, Any]], common: set[str]) -> dict[str, str]:
    """The common keywords found almost only in one side's messages (``NAMED_SHARE``), each
    with the side (user or assistant) that writes it."""
    said: dict[str, Counter[str]] = {term: Counter() for term in common}
    for row in rows:
        for term in common.intersection(row["search_terms"] or ()):
            said[term][row["role"]] += 1
    return {term: role for term, roles in said.items() for role, count in roles.items()
            if role in ADDRESSED and count >= NAMED_SHARE * sum(roles.values())}


def names(common: set[str], sides: Mapping[str, str], run_chars: set[str]) -> set[str]:
    """The common keywords that name one of the two people: one side's words
    (``one_sided``), and the characters of a word the dictionary lacks ("林晓" as 林, 晓).

    Only these are kept from the embedding model: a name pulls every "Hey Maya!" above the
    line that answers, while the question's other common words say what it is about ("unpaid
    work", "搬进新家"). On the long-dialogue dev set keeping every common word from the model
    lost the evidence session for a twelfth of the questions that keeping only names found."""
    return {t for t in common if t in sides or t in run_chars}


def named_speaker(sides: Mapping[str, str]) -> str | None:
    """The side of the conversation (user or assistant) the question's person is, when its
    one-sided common keywords tell (``one_sided``): in a two-person history a name is said by
    the other person, the one who addresses them ("Hey Maya!" is Tom's line), so a word found
    almost only in one side's messages names the other side. "What is Maya afraid of?" is
    answered by a line Maya wrote. None when none tells or they disagree (the question names
    both)."""
    addressed = {ADDRESSED[role] for role in sides.values()}
    return addressed.pop() if len(addressed) == 1 else None


_WORD = re.compile(r"[A-Za-z]+(?:['’][A-Za-z]+)*")


def without_terms(text: str, terms: set[str]) -> str:
    """``text`` without the words whose index term is in ``terms`` (English words by their
    normalised form, Chinese by their characters), for the embedding model."""
    if not terms:
        return text
    kept = _WORD.sub(lambda m: "" if english.normalise(m.group(0)) in terms else m.group(0),
                     text)
    for term in sorted((t for t in terms if tokens.has_han(t)), key=len, reverse=True):
        kept = kept.replace(term, "")
    kept = " ".join(kept.split())
    return kept if not nothing_to_search(kept) else text


async def _build_fragments(pool: Any, chosen: list[tuple[RankedSession, str]], context: int
                           ) -> list[Fragment]:
    matched = {i for item, _ in chosen for i in item.matched_ids}
    async with cursor(pool) as cur:
        rows = await db.context_windows(cur, sorted(matched), context)
    by_session: dict[str, list[db.ContextMessage]] = {}
    for row in rows:
        by_session.setdefault(row["session_id"], []).append(row)
    fragments: list[Fragment] = []
    for item, fid in chosen:
        ids = set(item.matched_ids)
        messages: list[FragmentMessage] = [{
            "role": row["role"],
            "content": trim(row["content"], MATCH_CHARS if row["id"] in ids else CONTEXT_CHARS),
            "created_at": row["created_at"].isoformat(),
            "matched": row["id"] in ids,
        } for row in by_session.get(item.session_id, [])]
        fragments.append({
            "fragment_id": fid,
            "session_id": item.session_id,
            "score": item.score,
            "parts": item.parts,
            "latest_match_at": item.latest.isoformat(),
            "messages": messages,
        })
    return fragments
