"""The settings page and how each setting appears in its form."""

from pawwake.dashboard.settings.page import setup

__all__ = ["setup"]
