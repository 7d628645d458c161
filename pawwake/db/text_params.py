"""Every text parameter sent to PostgreSQL is made storable first (no NUL, no lone surrogate).

One psycopg2 adapter for ``str`` covers every writer and every query, present and future:
chat turns, sidecar turns, memories, imports, settings, summaries, search terms. ``jsonb``
values are serialised with ``storable_json`` at their call sites, since a ``\\u0000`` escape
inside JSON text is only wrong there. The cleaning function lives in ``pawwake.text.storable``
(pure, imports nothing of ours) so that input validation uses the very same rule.
"""

from __future__ import annotations

from psycopg2.extensions import QuotedString, register_adapter

from pawwake.text.storable import storable_text


def adapt_text(value: str) -> QuotedString:
    """The quoted form of a text parameter, cleaned to what PostgreSQL stores."""
    return QuotedString(storable_text(value))


def register_text_adapter() -> None:
    """Install the adapter process-wide (idempotent: the registry is a dict)."""
    register_adapter(str, adapt_text)


register_text_adapter()
