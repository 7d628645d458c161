"""The memories table's rows: what its readers get back (``db/memories.py`` ``COLUMNS``) and
what writers hand in, typed once for every layer above (see docs/ARCHITECTURE.md, "Records")."""

from __future__ import annotations

from datetime import date, datetime
from typing import TypedDict


class MemoryFields(TypedDict, total=False):
    """What a writer may state about a memory, each part optional (an insert takes
    ``db/memories.py`` ``INSERT_DEFAULTS`` for the rest); a row read back has every one."""

    content: str
    importance: int
    layer: int
    title: str | None
    is_active: bool
    source_session: str | None
    event_date: date | None
    remind_at: datetime | None
    reminder_delivered_at: datetime | None
    external_id: str | None
    archived_at: datetime | None


class MemoryRow(MemoryFields):
    """A memory as every reader gets it (``COLUMNS``: ``MemoryFields`` and these): the store,
    the API and MCP (through ``memory_json``), the dashboard, backups, consolidation."""

    id: int
    merged_from: list[int]
    superseded_by: int | None
    created_at: datetime
    updated_at: datetime
    last_accessed: datetime | None


class NewMemory(MemoryFields, total=False):
    """A memory to insert (``db/memories.py`` ``INSERT_FIELDS``)."""

    created_at: datetime | None  # None: the moment of the insert
    search_terms: list[str]
    model_keywords: list[str]
    model_questions: list[str]
    described_at: datetime | None


class MemoryChanges(TypedDict, total=False):
    """What ``db/memories.py`` ``update_memory`` may set on one row (``UPDATABLE``)."""

    content: str
    importance: int
    layer: int
    title: str | None
    search_terms: list[str]
    model_keywords: list[str]
    model_questions: list[str]
    described_at: datetime | None


class LayerCount(TypedDict):
    layer: int
    active: int
    archived: int


class SourceMessage(TypedDict):
    """A stored message a memory was extracted from."""

    id: int
    session_id: str
    role: str
    content: str
    created_at: datetime
    deleted_at: datetime | None


class TermsRow(TypedDict):
    id: int
    content: str
    search_terms: list[str]


class DanglingLink(TypedDict):
    id: int
    missing_sources: list[int]
    missing_successor: int | None
