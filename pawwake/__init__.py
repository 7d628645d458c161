"""Pawwake (爪迹): a memory gateway for OpenAI-compatible chat."""

# The one place the version is written: GET /, the dashboard footer and pyproject.toml read
# it; the newest release heading of CHANGELOG.md names the same number.
__version__ = "0.1.0"

# Where this program's source is offered to everyone who uses it over the network (AGPL-3.0
# section 13): the dashboard footer links it. A deployment running changed code points it at
# its own repository.
SOURCE_URL = "https://github.com/pawwake/pawwake"
