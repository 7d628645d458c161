"""The background jobs page."""

from pawwake.dashboard.jobs.page import setup

__all__ = ["setup"]
