"""Settings that were removed: an old deployment that still sets one learns at start-up what
replaced it, instead of the value being silently ignored."""

from __future__ import annotations

import logging
from collections.abc import Mapping

log = logging.getLogger(__name__)

# name -> what to set instead (the same wording in the README's upgrade note)
REMOVED: dict[str, str] = {
    "MEMORY_EXTRACT_ENABLED": (
        "MEMORY_EXTRACT_INTERVAL=0 turns automatic extraction off and MAX_MEMORIES_INJECT=0 "
        "turns automatic injection off (MEMORY_ENABLED=false turns the whole memory system off)"),
    "MEMORY_API_KEY": (
        "API_KEY: the memory model is called with it at API_BASE_URL, like every call of the "
        "gateway's own (pick a MEMORY_MODEL that key can use)"),
    "MEMORY_SOURCE_DEDUPE_ENABLED": (
        "nothing (extraction itself drops items that repeat relevant or recent memories)"),
    "WEIGHT_KEYWORD": "MEMORY_HW_* for hybrid search (keyword-only search has fixed weights)",
    "WEIGHT_IMPORTANCE": "MEMORY_HW_* for hybrid search (keyword-only search has fixed weights)",
    "WEIGHT_RECENCY": "MEMORY_HW_* for hybrid search (keyword-only search has fixed weights)",
}


def warn_removed(environ: Mapping[str, str]) -> list[str]:
    """Log one warning per removed setting present in ``environ``; return their names.
    Only names are logged, never values."""
    found = [name for name in REMOVED if name in environ]
    for name in found:
        log.warning("%s was removed and is ignored; use instead: %s", name, REMOVED[name])
    return found
