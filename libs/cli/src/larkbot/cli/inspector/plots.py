"""Plots as inline SVG, drawn on the server: no script, no remote library, nothing for the CSP to allow.
Colours come from classes in ``inspector.css``; each mark carries a ``<title>`` (the browser's tooltip).

- :func:`tokens_plot`: per wake-up, stacked bars of cache-read input, uncached input and output tokens,
  with the cache-hit ratio (cache reads over input) as a line on its own 0-100 % axis.
- :func:`latency_plot`: per wake-up, the probe's and the primary's model latency.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..web import Markup, el, join

WIDTH, HEIGHT = 760, 220
LEFT, RIGHT, TOP, BOTTOM = 56, 48, 16, 28


@dataclass(frozen=True, slots=True)
class TokenPoint:
    label: str
    cache_read: int
    uncached: int
    output: int

    @property
    def hit(self) -> float | None:
        total = self.cache_read + self.uncached
        return self.cache_read / total if total else None


@dataclass(frozen=True, slots=True)
class LatencyPoint:
    label: str
    probe_ms: int | None
    primary_ms: int | None


def _nice(top: float) -> float:
    """An axis maximum: 1, 2 or 5 times a power of ten, at least ``top``."""
    if top <= 0:
        return 1.0
    scale = 1.0
    while scale * 10 <= top:
        scale *= 10
    while scale > top:
        scale /= 10
    for step in (1, 2, 5, 10):
        if step * scale >= top:
            return step * scale
    return 10 * scale


def _frame(top: float, unit: str, right_axis: bool) -> list[Markup]:
    inner_h = HEIGHT - TOP - BOTTOM
    marks: list[Markup] = []
    for i in range(5):
        y = TOP + inner_h - inner_h * i / 4
        value = top * i / 4
        marks.append(el("line", {"class": "grid", "x1": LEFT, "x2": WIDTH - RIGHT, "y1": y, "y2": y}))
        marks.append(
            el("text", {"class": "axis", "x": LEFT - 6, "y": y + 4, "text-anchor": "end"}, f"{value:,.0f}")
        )
        if right_axis:
            marks.append(el("text", {"class": "axis", "x": WIDTH - RIGHT + 6, "y": y + 4}, f"{25 * i}%"))
    marks.append(el("text", {"class": "axis", "x": 4, "y": TOP - 4}, unit))
    return marks


def _svg(title: str, marks: Sequence[Markup], legend: Sequence[tuple[str, str]]) -> Markup:
    keys = [
        join(
            el("rect", {"class": css, "x": LEFT + 130 * i, "y": HEIGHT - 14, "width": 10, "height": 10}),
            el("text", {"class": "axis", "x": LEFT + 130 * i + 14, "y": HEIGHT - 5}, name),
        )
        for i, (name, css) in enumerate(legend)
    ]
    return el(
        "svg",
        {"class": "plot", "viewBox": f"0 0 {WIDTH} {HEIGHT}", "role": "img", "aria-label": title},
        el("title", None, title),
        marks,
        keys,
    )


def tokens_plot(points: Sequence[TokenPoint]) -> Markup:
    if not points:
        return el("p", {"class": "empty"}, "no model calls recorded yet")
    top = _nice(max(p.cache_read + p.uncached + p.output for p in points))
    inner_w, inner_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    slot = inner_w / len(points)
    bar = max(1.0, min(slot * 0.7, 48.0))
    marks = _frame(top, "tokens", right_axis=True)
    hit_line: list[str] = []
    for n, p in enumerate(points):
        x = LEFT + n * slot + (slot - bar) / 2
        y = float(TOP + inner_h)
        for css, value in (("cache", p.cache_read), ("uncached", p.uncached), ("output", p.output)):
            h = inner_h * value / top
            y -= h
            marks.append(
                el(
                    "rect",
                    {
                        "class": css,
                        "x": f"{x:.1f}",
                        "y": f"{y:.1f}",
                        "width": f"{bar:.1f}",
                        "height": f"{h:.1f}",
                    },
                    el("title", None, f"{p.label}: {css} {value:,}"),
                )
            )
        if p.hit is not None:
            hit_line.append(f"{x + bar / 2:.1f},{TOP + inner_h * (1 - p.hit):.1f}")
            marks.append(
                el(
                    "circle",
                    {
                        "class": "hit",
                        "cx": f"{x + bar / 2:.1f}",
                        "cy": f"{TOP + inner_h * (1 - p.hit):.1f}",
                        "r": 2.5,
                    },
                    el("title", None, f"{p.label}: cache hit {p.hit:.0%}"),
                )
            )
    if len(hit_line) > 1:
        marks.append(el("polyline", {"class": "hit", "points": " ".join(hit_line)}))
    legend = [
        ("cache read", "cache"),
        ("input, not cached", "uncached"),
        ("output", "output"),
        ("cache hit %", "hit"),
    ]
    return _svg("tokens per wake-up and cache-hit ratio", marks, legend)


def latency_plot(points: Sequence[LatencyPoint]) -> Markup:
    values = [v for p in points for v in (p.probe_ms, p.primary_ms) if v is not None]
    if not values:
        return el("p", {"class": "empty"}, "no model calls recorded yet")
    top = _nice(max(values))
    inner_w, inner_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    slot = inner_w / len(points)
    bar = max(1.0, min(slot * 0.35, 24.0))
    marks = _frame(top, "ms", right_axis=False)
    for n, p in enumerate(points):
        for k, (css, value) in enumerate((("probe", p.probe_ms), ("primary", p.primary_ms))):
            if value is None:
                continue
            h = inner_h * value / top
            x = LEFT + n * slot + (slot - 2 * bar) / 2 + k * bar
            marks.append(
                el(
                    "rect",
                    {
                        "class": css,
                        "x": f"{x:.1f}",
                        "y": f"{TOP + inner_h - h:.1f}",
                        "width": f"{bar:.1f}",
                        "height": f"{h:.1f}",
                    },
                    el("title", None, f"{p.label}: {css} {value:,} ms"),
                )
            )
    return _svg("model latency per hop", marks, [("probe", "probe"), ("primary (all steps)", "primary")])


__all__ = ["LatencyPoint", "TokenPoint", "latency_plot", "tokens_plot"]
