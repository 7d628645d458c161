"""The status page (the dashboard's start page)."""

from pawwake.dashboard.status.page import setup

__all__ = ["setup"]
