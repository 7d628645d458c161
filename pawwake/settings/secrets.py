"""What of a secret setting's value may be shown (a page, the API, a form): only whether it is
set, or a provider key's last four characters."""

from __future__ import annotations

from typing import Any

from pawwake.settings.entry import Setting

MASK = "\u2022\u2022\u2022\u2022"  # "••••": what stands for the hidden part of a secret
MASK_MARKERS = (MASK, "****")  # "****" is the older mask; a value holding either is a mask
TAIL_MIN_LENGTH = 12  # shorter keys show no character at all
# Provider keys may show their last four characters, so a user can tell which key is in force.
# Every other secret (passwords, session and gateway secrets, DATABASE_URL) shows only whether
# it is set: a new secret setting is presence-only unless it is added here.
TAIL_SECRETS = frozenset({"API_KEY", "EMBEDDING_API_KEY", "MESSAGES_API_KEY"})


def mask_secret(value: str, *, show_tail: bool = False) -> str:
    """``""`` when unset; ``••••1234`` for a long provider key; ``••••`` for anything else."""
    if not value:
        return ""
    if show_tail and len(value) >= TAIL_MIN_LENGTH:
        return MASK + value[-4:]
    return MASK


def secret_display(setting: Setting[Any], value: Any) -> str | None:
    """What of a secret setting's value may be shown anywhere: None for presence-only ones."""
    if setting.name not in TAIL_SECRETS:
        return None
    return mask_secret(value or "", show_tail=True)


def secret_form_value(setting: Setting[Any], value: Any) -> str:
    """The mask a form holds for a secret; sent back unchanged it means "keep"."""
    shown = secret_display(setting, value)
    return shown if shown is not None else mask_secret(value or "")
