"""Pawwake (爪迹): a memory gateway for OpenAI-compatible chat."""

# The one place the version is written: GET /, the dashboard footer and pyproject.toml read
# it; the newest release heading of CHANGELOG.md names the same number.
__version__ = "0.1.0"
