"""Geometry of the usage chart, drawn on the server as SVG: stacked bars per local day, a
y axis with round ticks, day labels on the x axis and a <title> on each day for hover values.

Server-drawn SVG rather than a chart library: no script to vendor, pin or load on a slow
phone, it works with htmx swaps and without JavaScript, and tests can read the numbers in
the HTML."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date
from typing import Any

# The chart is as wide as its card and HEIGHT px tall: horizontal positions are percentages of
# the width, vertical ones pixels, so it fits a phone and a desk alike without scaling its text
# (a viewBox would shrink 11 px labels to 5 px on a phone, or need a box that scrolls). The y
# labels sit in a narrow drawing of their own beside it (AXIS_W px).
HEIGHT, TOP, BOTTOM = 220, 22, 26  # px: plot from TOP to HEIGHT - BOTTOM, day labels below
AXIS_W = 44
PLOT_H = HEIGHT - TOP - BOTTOM
MAX_X_LABELS = 6
BAR_FILL = 0.72  # share of a day's slot the bar takes


def _pct(value: float) -> str:
    return f"{value:.3f}".rstrip("0").rstrip(".") + "%"


@dataclass(frozen=True)
class Segment:
    kind: str
    y: float
    height: float
    tokens: int


def nice_step(peak: float, ticks: int = 4) -> int:
    """A round tick step (1, 2, 2.5, 5 x 10^n) so that ``ticks`` steps cover ``peak``."""
    raw = max(peak, 1) / ticks
    magnitude = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 2.5, 5, 10):
        step = factor * magnitude
        if step >= raw and step == int(step):  # tokens are whole: no 2.5-token ticks
            return max(1, int(step))
    return int(10 * magnitude)


def compact(number: float) -> str:
    """A short axis label: 950, 1.2K, 12K, 3.4M."""
    for size, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if number >= size:
            value = number / size
            text = f"{value:.1f}" if value < 10 else f"{value:.0f}"
            return text.removesuffix(".0") + suffix
    return f"{number:.0f}"


def chart(days: list[tuple[date, dict[str, int]]], kinds: tuple[str, ...]) -> dict[str, Any]:
    """Everything the template draws. ``days`` is (local day, tokens by kind), oldest first."""
    peak = max((sum(tokens.get(k, 0) for k in kinds) for _, tokens in days), default=0)
    step = nice_step(peak)
    top = step * max(1, math.ceil(peak / step))
    scale = PLOT_H / top
    slot = 100 / max(1, len(days))  # percent of the width per day
    bar = slot * BAR_FILL
    stride = max(1, math.ceil(len(days) / MAX_X_LABELS))
    columns = []
    for index, (day, tokens) in enumerate(days):
        bottom = float(TOP + PLOT_H)
        segments = []
        for kind in kinds:
            value = tokens.get(kind, 0)
            if value <= 0:
                continue
            height = value * scale
            bottom -= height
            segments.append(Segment(kind, round(bottom, 2), round(height, 2), value))
        x = index * slot
        # the first and last labels are anchored inside the edges, so none is cut off
        anchor = ("end" if index == len(days) - 1 and len(days) > 1
                  else "start" if index == 0 and len(days) > 1 else "middle")
        columns.append({
            "day": day, "tokens": tokens, "total": sum(tokens.get(k, 0) for k in kinds),
            "slot_x": _pct(x), "slot_w": _pct(slot),
            "x": _pct(x + (slot - bar) / 2), "width": _pct(bar),
            "segments": segments,
            # label every stride-th day counting back from the last, so today is labelled
            "label": day.strftime("%m-%d") if (len(days) - 1 - index) % stride == 0 else "",
            "anchor": anchor,
            "label_x": _pct(x + slot if anchor == "end" else x if anchor == "start"
                            else x + slot / 2)})
    y_ticks = [{"y": round(TOP + PLOT_H - value * scale, 2), "label": compact(value)}
               for value in range(0, top + 1, step)]
    return {"height": HEIGHT, "axis_w": AXIS_W, "top": TOP, "bottom": TOP + PLOT_H,
            "label_y": HEIGHT - 8, "columns": columns, "y_ticks": y_ticks, "peak": peak}
