"""Runtime configuration: environment defaults overlaid with values saved in the dashboard."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

import aiopg

from pawwake.cancelling import cancel_and_wait
from pawwake.db import gateway_config as config_db
from pawwake.db.errors import DatabaseUnavailable
from pawwake.db.pool import DATABASE_ERRORS, cursor, transaction
from pawwake.settings import BY_NAME, Settings
from pawwake.settings.entry import SettingError
from pawwake.settings.secrets import MASK_MARKERS, secret_display, secret_form_value
from pawwake.settings.values import parse_value

log = logging.getLogger(__name__)
_KEEP = object()  # a secret sent back as shown: keep the stored value


class AdminOnly(SettingError):
    """A change to where provider keys are sent, asked without admin rights (403)."""

    def __init__(self, name: str) -> None:
        super().__init__(name, "decides where the provider keys are sent, so it changes only "
                               "from the dashboard, or with X-Admin-Key set to ADMIN_SECRET",
                         "admin_only")


REFRESH_SECONDS = 3.0  # other processes' saves are in force here within about this long


class RuntimeConfig:
    """The settings in force now. Saves apply to the very next request of this process; saves
    made through other processes (replicas on the same database) are re-read in the
    background every ``REFRESH_SECONDS``, so no request waits for that read and an idle
    process does not serve one request with what it read long ago."""

    def __init__(self, base: Settings) -> None:
        self._base = base
        self._overrides: dict[str, Any] = {}
        self._current = base
        self._pool: aiopg.Pool | None = None
        self._expects_database = False
        self._saves = 0  # saves applied here: a re-read that began before one is stale
        self._following: asyncio.Task[None] | None = None
        self._unparsable: set[tuple[str, str]] = set()  # saved values already warned about

    def expect_database(self) -> None:
        """A database is configured but may arrive late: until ``attach``, saves are refused
        (they would apply to this process only and be lost on restart)."""
        self._expects_database = True

    async def attach(self, pool: aiopg.Pool) -> None:
        """Start reading and writing saved values in the database; values saved there apply
        from now on, also when the database arrives after start-up."""
        self._pool = pool
        await self.refresh()
        if self._following is None:
            self._following = asyncio.create_task(self._follow(), name="settings-follow")

    def current(self) -> Settings:
        return self._current

    async def fresh(self) -> Settings:
        """The settings in force now (kept current by the background re-read)."""
        return self._current

    async def _follow(self) -> None:
        """Re-read saved values every ``REFRESH_SECONDS``; an outage is logged once."""
        failing = False
        while True:
            await asyncio.sleep(REFRESH_SECONDS)
            try:
                await self.refresh()
            except DATABASE_ERRORS as exc:
                if not failing:
                    log.warning("could not re-read saved settings (%s); the values read "
                                "before stay in force", type(exc).__name__)
                failing = True
            else:
                if failing:
                    log.info("saved settings are re-read again")
                failing = False

    async def close(self) -> None:
        """Stop re-reading (called before the database pool closes)."""
        if self._following is not None:
            if not await cancel_and_wait(self._following):
                log.warning("the saved settings' re-read did not stop")
            self._following = None

    async def refresh(self) -> None:
        if self._pool is None:
            return
        saves = self._saves
        async with cursor(self._pool) as cur:
            stored = await config_db.load_overrides(cur)
        if saves != self._saves:
            return  # a save here meanwhile: what was read may predate it; read again later
        overrides: dict[str, Any] = {}
        for name, raw in stored.items():
            setting = BY_NAME.get(name)
            if setting is None or not setting.hot:
                continue
            try:
                overrides[name] = parse_value(setting, raw)
            except SettingError:
                if (name, repr(raw)) not in self._unparsable:
                    self._unparsable.add((name, repr(raw)))
                    log.warning("ignoring a saved value for %s that no longer parses", name)
        self._apply(overrides)

    def _apply(self, overrides: dict[str, Any]) -> None:
        self._overrides = overrides
        self._current = self._base.with_values(overrides)

    def validate(self, changes: Mapping[str, Any], *, admin: bool = True) -> dict[str, Any]:
        """Parse a batch of changes; raise SettingError on the first bad one (see ``check``)."""
        parsed, refused = self.check(changes, admin=admin)
        if refused:
            raise refused[0]
        return parsed

    def check(self, changes: Mapping[str, Any], *, admin: bool = True
              ) -> tuple[dict[str, Any], list[SettingError]]:
        """Parse every change: the values that fit and a SettingError for each that does not,
        so a form can mark every bad field at once.

        Restart-only settings are refused whatever the value, so a right guess of a secret
        answers exactly like a wrong one. A secret sent back exactly as shown (``••••1234``,
        ``••••``) means "keep the stored value" and is dropped; any other masked-looking value
        is refused rather than stored as the new secret. Without ``admin`` (the API with the
        gateway key alone) a change to an admin setting is refused (``AdminOnly``); sending one
        back unchanged is not a change.
        """
        parsed: dict[str, Any] = {}
        refused: list[SettingError] = []
        for name, raw in changes.items():
            try:
                value = self._parse_change(name, raw, admin)
            except SettingError as exc:
                refused.append(exc)
            else:
                if value is not _KEEP:
                    parsed[name] = value
        return parsed, refused

    def _parse_change(self, name: str, raw: Any, admin: bool) -> Any:
        setting = BY_NAME.get(name)
        if setting is None:
            raise SettingError(name, "unknown setting", "unknown")
        if not setting.hot:
            raise SettingError(name, "is set in the environment and only changes there "
                                     "(with a restart); it cannot be changed here",
                               "restart_only")
        if setting.secret and isinstance(raw, str) and any(m in raw for m in MASK_MARKERS):
            if raw == secret_form_value(setting, self._current[name]):
                return _KEEP
            raise SettingError(name, "looks like a masked value; send the full secret, "
                                     "or the mask exactly as shown to keep the current one",
                               "masked_value")
        value = parse_value(setting, raw)
        if setting.admin and not admin:
            if value != self._current[name]:
                raise AdminOnly(name)
            return _KEEP  # sent back as it is: no change, and not pinned over the environment
        return value

    async def update(self, changes: Mapping[str, Any], *, admin: bool = True) -> Settings:
        """Validate, store (one transaction) and apply. Without a database: this process only."""
        parsed = self.validate(changes, admin=admin)
        if self._pool is None and self._expects_database and parsed:
            raise DatabaseUnavailable("Settings are saved in the database, which is not "
                                      "connected yet; try again shortly.")
        if self._pool is not None and parsed:
            async with transaction(self._pool) as cur:  # a save is all or nothing
                await config_db.save_overrides(cur, parsed)
        self._saves += 1
        self._apply({**self._overrides, **parsed})
        return self._current

    def public_view(self) -> list[dict[str, Any]]:
        """Every setting with its value for display; secrets masked, origin noted.

        Presence-only secrets have ``value`` None; ``is_set`` says whether they are set.
        """
        view = []
        for name, setting in BY_NAME.items():
            value = self._current[name]
            view.append({
                "name": name,
                "group": setting.group,
                "kind": setting.kind,
                "value": secret_display(setting, value) if setting.secret else value,
                "is_set": bool(value) if setting.secret else None,
                "default": None if setting.secret else setting.default,
                "hot": setting.hot,
                "secret": setting.secret,
                "choices": list(setting.choices),
                "saved": name in self._overrides,
                "help_zh": setting.help_zh,
                "help_en": setting.help_en,
            })
        return view
