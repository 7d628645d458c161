"""Pawwake (爪迹): a memory gateway for OpenAI-compatible chat."""

__version__ = "0.1.0"
