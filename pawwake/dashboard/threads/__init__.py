"""The partition threads page."""

from pawwake.dashboard.threads.page import setup

__all__ = ["setup"]
