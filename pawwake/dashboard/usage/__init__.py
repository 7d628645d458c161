"""The token usage page."""

from pawwake.dashboard.usage.page import setup

__all__ = ["setup"]
