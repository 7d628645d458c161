"""The vector side of conversation recall: the question's nearest messages, and for every
candidate its raw cosine, its cosine measured from the store's background
(``recall.background``) and its neighbours in its session.

The nearest ``NEAREST`` messages are read in the question's direction away from the
background and join the candidates; of the keyword candidates, the ``COSINE_LOOKUPS`` best get
their vectors' evidence looked up. The statement that reads the nearest messages
(``MessageVectors.nearest_with_facts``) also gives every such candidate what ranking needs:
its dot products with the question and the background (computed by pgvector, or from the
numpy index), the messages before and after it, and for a "when" question the head of its
text (one round trip where reading the neighbours, then the facts, made two).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pawwake.database import require_database
from pawwake.db.message_vectors import MESSAGE_VECTORS
from pawwake.llm.embeddings import EmbeddingError
from pawwake.recall import index as conversation_index
from pawwake.recall import when
from pawwake.recall.rank import MessageHit, SemanticScale
from pawwake.recall.vectors import CandidateFacts
from pawwake.text.query import nothing_to_search

if TYPE_CHECKING:
    from pawwake.recall.faces import ConversationRecall
    from pawwake.settings import Settings

log = logging.getLogger(__name__)

NEAREST = 100  # nearest messages read per query (at least): each is a candidate
COSINE_LOOKUPS = 150  # keyword candidates (best shares first) whose vector evidence is read
ADJACENT = 60  # the candidates closest to the question whose session neighbours are looked up
# The raw-cosine floor when CONVERSATION_MIN_SCORE_THRESHOLD is empty. Chat lines are short:
# with the local e5 model a quarter of the English answers on the long-dialogue dev set sit
# below memory search's 0.78 (their 1st percentile is 0.74), Chinese ones above 0.8.
DEFAULT_FLOORS: Mapping[str, float] = {"api": 0.3, "local": 0.72}


@dataclass(frozen=True)
class SemanticOutcome:
    used: bool
    warning: str | None = None
    threshold: float | None = None  # the raw-cosine floor in force
    scale: SemanticScale | None = None


def conversation_threshold(settings: Settings, provider: str) -> float:
    """The configured raw-cosine floor, used as set; empty follows the provider."""
    value = settings.CONVERSATION_MIN_SCORE_THRESHOLD
    return DEFAULT_FLOORS[provider] if value is None else float(value)


async def add_semantic_evidence(recall: ConversationRecall, settings: Settings, query: str,
                                hits: dict[int, MessageHit], *, excluded_sessions: list[str],
                                keep_below: int, pool_size: int, asks_when: bool
                                ) -> SemanticOutcome:
    """Give candidates their vector evidence (the nearest messages join ``hits``); returns
    whether the semantic part was used, and its scale."""
    database = require_database(recall.database)
    if nothing_to_search(query):  # not worth a model call
        return SemanticOutcome(False)
    try:
        vector, provenance = await recall.embedder.embed_query(settings, query)
    except EmbeddingError as exc:
        log.warning("query embedding for recall failed: %s", exc)
        return SemanticOutcome(False, f"Query embedding failed ({exc}); keywords only.")
    threshold = conversation_threshold(settings, provenance.provider)
    pgvector = await recall.vectors.choose(settings, database, provenance,
                                           MESSAGE_VECTORS) == "pgvector"
    if pgvector:
        conversation_index.request_vector_index(recall, settings, provenance)
    vectors = recall.recall_vectors
    background = await vectors.background(database.pool, provenance, pgvector=pgvector)
    direction = background.direction(vector) if background is not None else vector
    against = [vector] if background is None else [vector, background.vector]
    # the keyword candidates, best shares first: the first COSINE_LOOKUPS of them that are
    # not among the nearest get their vector evidence read in the same statement
    k = max(NEAREST, 5 * pool_size)
    by_share = [hit.id for hit in sorted(hits.values(), key=lambda h: -h.keyword)][
        :COSINE_LOOKUPS + k]
    neighbours, facts = await vectors.nearest_with_facts(
        database.pool, provenance, direction, k, excluded_sessions,
        pgvector=pgvector, keep_below=keep_below, also=by_share, also_limit=COSINE_LOOKUPS,
        vectors=against, with_text=asks_when, adjacent_best=ADJACENT)
    if not neighbours:
        return SemanticOutcome(False, "No conversation message has a vector yet (the"
                               " embedding job fills them); keywords only.")
    nearest = [int(row["id"]) for row in neighbours]
    for row in neighbours:
        if row["id"] not in hits:
            hits[row["id"]] = MessageHit(row["id"], row["session_id"], row["created_at"])
    seen_from = background.from_query(vector) if background is not None else None
    for message_id, found in facts.items():
        hit = hits[message_id]
        _note(hit, found)
        if found.dots is not None:
            hit.cosine = found.dots[0]
            hit.centred = (seen_from.centred(found.dots[0], found.dots[1])
                           if seen_from is not None else found.dots[0])
    for hit in hits.values():  # the neighbours of the best candidates know them back
        before = hits.get(hit.prev_id) if hit.prev_id is not None else None
        if before is not None and before.next_id is None:
            before.next_id = hit.id
        after = hits.get(hit.next_id) if hit.next_id is not None else None
        if after is not None and after.prev_id is None:
            after.prev_id = hit.id
    centred = [c for i in nearest if (c := hits[i].centred) is not None]
    return SemanticOutcome(True, None, threshold, SemanticScale.of(centred, threshold))


async def add_time_words(recall: ConversationRecall, hits: Mapping[int, MessageHit]) -> None:
    """Keyword mode, for a "when" question: which of the best keyword candidates place
    something in time (hybrid mode learns it with their vector evidence)."""
    best = sorted(hits.values(), key=lambda h: -h.keyword)[:COSINE_LOOKUPS]
    facts = await recall.recall_vectors.facts(
        require_database(recall.database).pool, None, [h.id for h in best], [], pgvector=False,
        with_text=True)
    for message_id, found in facts.items():
        _note(hits[message_id], found)


def _note(hit: MessageHit, found: CandidateFacts) -> None:
    hit.prev_id, hit.next_id = found.prev_id, found.next_id
    hit.role = hit.role or found.role
    hit.timed = found.head is not None and when.mentions_time(found.head)
