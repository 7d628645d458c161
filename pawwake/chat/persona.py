"""The persona (system prompt): the dashboard's SYSTEM_PROMPT, else ``system_prompt.txt``."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from pawwake.settings import Settings

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_PERSONA_PATH = REPO_ROOT / "system_prompt.txt"


class PersonaFile:
    """The operator's persona file, re-read only when its modification time changes."""

    def __init__(self, path: str | Path = DEFAULT_PERSONA_PATH) -> None:
        self.path = Path(path)
        self._stamp: tuple[int, int] | None = None
        self._text: str | None = None

    def read(self) -> str | None:
        """The file's text, or None when it is missing, unreadable or blank."""
        try:
            stat = os.stat(self.path)
        except OSError:
            self._stamp, self._text = None, None
            return None
        stamp = (stat.st_mtime_ns, stat.st_size)
        if stamp != self._stamp:
            try:
                text = self.path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                log.warning("persona file %s could not be read (%s)", self.path,
                            type(exc).__name__)
                text = ""
            self._stamp, self._text = stamp, text.strip() or None
        return self._text


def resolve_persona(settings: Settings, persona_file: PersonaFile) -> str | None:
    """The persona in force for this request: a value saved in the dashboard wins."""
    saved = settings.SYSTEM_PROMPT
    if saved and saved.strip():
        return saved.strip()
    return persona_file.read()
