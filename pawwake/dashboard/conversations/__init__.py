"""The conversations page: the list, phrase search, the trash and one session's messages."""

from pawwake.dashboard.conversations.page import setup

__all__ = ["setup"]
