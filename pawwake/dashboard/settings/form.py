"""The settings form: what each setting looks like on the page, and which submitted values changed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from multidict import MultiMapping

from pawwake.settings import BY_NAME, GROUPS, Settings
from pawwake.settings.entry import Setting, SettingError
from pawwake.settings.secrets import MASK
from pawwake.settings.values import parse_value

# Form fields that are not settings start with this and are ignored by form_changes().
CONTROL_PREFIX = "_"
# The four memory search weights: number inputs that the page's script turns into sliders.
SLIDERS = frozenset({"MEMORY_HW_KEYWORD", "MEMORY_HW_SEMANTIC", "MEMORY_HW_IMPORTANCE",
                     "MEMORY_HW_RECENCY"})


def input_kind(setting: Setting[Any]) -> str:
    """Which control shows the setting."""
    if not setting.hot:
        return "readonly"
    if setting.secret:
        return "password"
    if setting.kind == "bool":
        return "checkbox"
    if setting.kind == "choice":
        return "select"
    if setting.kind in ("int", "float", "optional_float"):
        return "number"
    if setting.multiline:
        return "textarea"
    return "text"


def display_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def setting_view(item: Mapping[str, Any], lang: str, *, submitted: Mapping[str, str],
                 error: str | None) -> dict[str, Any]:
    """One row of the page, from a ``RuntimeConfig.public_view()`` entry."""
    setting = BY_NAME[item["name"]]
    if setting.secret:  # the mask, never a typed secret, even when the form had an error
        value = item["value"] if item["value"] is not None else (MASK if item["is_set"] else "")
    else:
        value = submitted.get(setting.name, display_value(item["value"]))
    return {
        "name": setting.name,
        "input": input_kind(setting),
        "kind": setting.kind,
        "help": setting.help_zh if lang == "zh" else setting.help_en,
        "value": value,
        "checked": value == "true",
        "secret": setting.secret,
        "masked": item["value"] if setting.secret else None,
        "is_set": item["is_set"],
        "choices": list(setting.choices),
        "minimum": setting.minimum,
        "maximum": setting.maximum,
        "step": "1" if setting.kind == "int" else "0.01" if setting.name in SLIDERS else "any",
        "slider": setting.name in SLIDERS,
        "optional": setting.kind in ("optional_float", "optional_url"),
        "model_picker": setting.model_picker,
        "saved": item["saved"],
        "error": error,
    }


def groups_view(public_view: list[dict[str, Any]], lang: str, *,
                submitted: Mapping[str, str] | None = None,
                errors: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """Settings grouped in the order of ``GROUPS``; each group keeps the table's order."""
    submitted = submitted or {}
    errors = errors or {}
    groups: dict[str, list[dict[str, Any]]] = {group: [] for group in GROUPS}
    for item in public_view:
        row = setting_view(item, lang, submitted=submitted, error=errors.get(item["name"]))
        groups.setdefault(item["group"], []).append(row)
    return [{"id": group, "title": f"group.{group}", "fields": rows, "message": None,
             "error": None, "editable": any(row["input"] != "readonly" for row in rows)}
            for group, rows in groups.items() if rows]


def submitted_values(form: MultiMapping[Any]) -> dict[str, str]:
    """The last value of each field (a checkbox follows its hidden "false"); CRLF becomes LF."""
    values: dict[str, str] = {}
    for name in set(form.keys()):
        if name.startswith(CONTROL_PREFIX):
            continue
        raw = form.getall(name)[-1]
        values[name] = raw.replace("\r\n", "\n") if isinstance(raw, str) else raw
    return values


def form_changes(current: Settings, submitted: Mapping[str, Any]) -> dict[str, Any]:
    """Only the fields whose value differs from the one in force, so that saving a group does
    not pin its untouched settings over the environment. Bad values are kept for the error, and
    so is any restart-only field: comparing it would tell a right guess of a secret apart."""
    changes: dict[str, Any] = {}
    for name, raw in submitted.items():
        setting = BY_NAME.get(name)
        if setting is None or not setting.hot:  # refused by validate(), whatever the value
            changes[name] = raw
            continue
        try:
            value = parse_value(setting, raw)
        except SettingError:
            changes[name] = raw
            continue
        if value != current[name]:
            changes[name] = raw
    return changes
