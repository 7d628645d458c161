"""The try-it page: one chat turn through the gateway, with what was injected beside it."""

from pawwake.dashboard.tryit.page import setup

__all__ = ["setup"]
