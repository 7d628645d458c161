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

WIDTH, HEIGHT = 720, 260
LEFT, RIGHT, TOP, BOTTOM = 56, 8, 12, 36
PLOT_W, PLOT_H = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
MAX_X_LABELS = 8
BAR_FILL = 0.72  # share of a day's slot the bar takes


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
    slot = PLOT_W / max(1, len(days))
    bar = max(1.0, slot * BAR_FILL)
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
        x = LEFT + index * slot
        columns.append({
            "day": day, "tokens": tokens, "total": sum(tokens.get(k, 0) for k in kinds),
            "slot_x": round(x, 2), "slot_w": round(slot, 2),
            "x": round(x + (slot - bar) / 2, 2), "width": round(bar, 2),
            "center": round(x + slot / 2, 2), "segments": segments,
            # label every stride-th day counting back from the last, so today is labelled
            "label": day.strftime("%m-%d") if (len(days) - 1 - index) % stride == 0 else ""})
    y_ticks = [{"y": round(TOP + PLOT_H - value * scale, 2), "label": compact(value)}
               for value in range(0, top + 1, step)]
    return {"width": WIDTH, "height": HEIGHT, "left": LEFT, "right": WIDTH - RIGHT,
            "top": TOP, "bottom": TOP + PLOT_H, "label_y": TOP + PLOT_H + 18,
            "columns": columns, "y_ticks": y_ticks, "peak": peak}
