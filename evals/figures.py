"""The notebooks' figures, drawn so that they can be read: every series has its own marker, line style and colour;
series that coincide are said to (a note on the axes, not one curve hidden under another); every point carries its
95 % interval; and every figure carries a box saying what it shows and what it cannot.

`problems(fig)` is the check the test suite runs on every figure the notebooks draw: two series drawn alike, or
two series with the same points and no note naming both.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from itertools import product
from typing import Any

from reactgraph.evals.families import by_family
from reactgraph.evals.stats import mean_interval, success_interval

MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
LINES = ("-", "--", "-.", ":")
COLOURS = ("#0984e3", "#d63031", "#00b894", "#6c5ce7", "#e17055", "#2d3436", "#fdcb6e", "#e84393")
NOTE_GID = "coincide"  # the artist id of a note that names series drawn on top of each other


def styles(names: Sequence[str]) -> dict[str, dict[str, str]]:
    """A marker, line style and colour per name, no two alike (marker and colour both change from one to the next)."""
    combos = [(MARKERS[i % len(MARKERS)], LINES[(i // len(MARKERS)) % len(LINES)], COLOURS[i % len(COLOURS)])
              for i in range(len(names))]
    return {n: {"marker": m, "linestyle": ls, "color": c} for n, (m, ls, c) in zip(names, combos, strict=True)}


def coinciding(series: Mapping[str, Sequence[float]]) -> list[list[str]]:
    """Groups of two or more series with the same points (to 1e-9), in the order given."""
    groups: dict[tuple[float, ...], list[str]] = defaultdict(list)
    for name, ys in series.items():
        groups[tuple(round(float(y), 9) for y in ys)].append(name)
    return [names for names in groups.values() if len(names) > 1]


def draw_series(ax: Any, xs: Sequence[Any], series: Mapping[str, Sequence[float]],
                intervals: Mapping[str, Sequence[tuple[float, float]]] | None = None, offset: float = 0.0) -> None:
    """Each series its own style, its 95 % intervals as error bars; series that coincide are named in a note.

    `offset` shifts series apart along a categorical x axis, whose points are not joined by lines (nothing lies
    between two categories); 0: a numeric x axis, points drawn where they are and joined."""
    look = styles(list(series))
    if offset:
        look = {name: {**style, "linestyle": "none"} for name, style in look.items()}
    middle = (len(series) - 1) / 2
    for i, (name, ys) in enumerate(series.items()):
        x = [float(v) + (i - middle) * offset for v in xs] if offset else list(xs)
        bounds = (intervals or {}).get(name)
        errors = None if bounds is None else [[max(0.0, y - lo) for y, (lo, _) in zip(ys, bounds, strict=True)],
                                              [max(0.0, hi - y) for y, (_, hi) in zip(ys, bounds, strict=True)]]
        ax.errorbar(x, list(ys), yerr=errors, label=name, capsize=3, linewidth=1.4, markersize=6, **look[name])
    groups = coinciding(series)
    if groups:
        text = "; ".join(" = ".join(g) for g in groups)
        # Under the axes, where no data or legend can cover it.
        ax.text(0.0, -0.22, f"drawn on top of each other (same values): {text}", transform=ax.transAxes,
                fontsize="x-small", gid=NOTE_GID, color="#2d3436", va="top", wrap=True)


def caption(fig: Any, shows: str, cannot: str) -> None:
    """The box under every figure: what it shows, and what it cannot."""
    fig.text(0.01, 0.005, f"What this shows: {shows}\nWhat it cannot: {cannot}", fontsize="small", va="bottom",
             wrap=True, gid="caption", bbox={"boxstyle": "round", "facecolor": "#f5f6fa", "edgecolor": "#b2bec3"})


def family_figure(records: list[dict[str, Any]], title: str, shows: str, cannot: str) -> Any:
    """Per task family (x) and graph (one series each): success with its 95 % interval (bootstrap over tasks with
    several seeds, Wilson with one) and model calls per run with a 95 % interval of the mean."""
    import matplotlib.pyplot as plt

    families = by_family(records)
    graphs = list(dict.fromkeys(r["graph"] for r in records))
    success: dict[str, list[float]] = {g: [] for g in graphs}
    success_ci: dict[str, list[tuple[float, float]]] = {g: [] for g in graphs}
    calls: dict[str, list[float]] = {g: [] for g in graphs}
    calls_ci: dict[str, list[tuple[float, float]]] = {g: [] for g in graphs}
    for rs in families.values():
        for g in graphs:
            mine = [r for r in rs if r["graph"] == g]
            rate = sum(bool(r["success"]) for r in mine) / len(mine) if mine else 0.0
            bounds = success_interval(mine) if mine else {"low": 0.0, "high": 1.0}
            success[g].append(rate * 100)
            success_ci[g].append((bounds["low"] * 100, bounds["high"] * 100))
            mean, low, high = mean_interval([float(r["model_calls"]) for r in mine] or [0.0])
            calls[g].append(mean)
            calls_ci[g].append((low, high))
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.2))
    xs = list(range(len(families)))
    draw_series(axes[0], xs, success, success_ci, offset=0.12)
    draw_series(axes[1], xs, calls, calls_ci, offset=0.12)
    for ax, label in zip(axes, ("success (%) · 95% interval", "model calls per run · 95% interval"), strict=True):
        ax.set_xticks(xs, [f.replace("_", "\n") for f in families], fontsize="small")
        ax.set_title(label, fontsize="medium")
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylim(-5, 112)
    axes[0].legend(fontsize="small", ncol=2, loc="lower right")
    fig.suptitle(title, fontsize="medium")
    caption(fig, shows, cannot)
    fig.subplots_adjust(bottom=0.27, top=0.88)
    return fig


def problems(fig: Any) -> list[str]:
    """What makes a figure unreadable: two series of one axes drawn alike, or with the same points and no note
    naming them. Empty when the figure is fine (the suite checks every notebook figure with it)."""
    found = []
    for index, ax in enumerate(fig.axes):
        lines = [line for line in ax.get_lines() if not line.get_label().startswith("_")]
        looks = [(line.get_marker(), line.get_linestyle(), line.get_color()) for line in lines]
        for a, b in product(range(len(lines)), repeat=2):
            if a < b and looks[a] == looks[b]:
                found.append(f"axes {index}: {lines[a].get_label()} and {lines[b].get_label()} are drawn alike")
        notes = " ".join(t.get_text() for t in ax.texts if t.get_gid() == NOTE_GID)
        points: dict[str, Sequence[float]] = {str(line.get_label()): [float(y) for y in line.get_ydata()]
                                              for line in lines}
        for group in coinciding(points):
            if not all(name in notes for name in group):
                found.append(f"axes {index}: {', '.join(group)} have the same points and no note says so")
    if not any(t.get_gid() == "caption" for t in fig.texts):
        found.append("no 'what this shows and what it cannot' box")
    return found


__all__ = ["caption", "coinciding", "draw_series", "family_figure", "mean_interval", "problems", "styles"]
