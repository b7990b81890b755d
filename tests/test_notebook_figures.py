"""The notebooks' figures can be read (issue 36): no two series drawn alike, series with the same points named in a
note (not one hidden under another), every point with its interval, and a "what this shows and what it cannot" box.
`problems(fig)` is the check; the notebooks assert it on every figure they draw, and these tests hold the check
itself to what it promises."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reactgraph.evals.figures import caption, coinciding, draw_series, family_figure, problems, styles

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))
RESULTS = Path(__file__).parent.parent / "notebooks" / "results"


def pyplot():
    """matplotlib's pyplot, off screen; imported by the tests that draw, not at collection, where every worker of
    the suite would import it (≈ 0.35 s each)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def figure(series, note=True, box=True):
    plt = pyplot()
    fig, ax = plt.subplots()
    if note:
        draw_series(ax, [0, 10, 30], series, {k: [(v - 1, v + 1) for v in ys] for k, ys in series.items()})
    else:  # the same lines, drawn without the helper: one hides another and nothing says so
        for name, ys in series.items():
            ax.plot([0, 10, 30], ys, label=name, marker="o", linestyle="-", color="#0984e3")
    if box:
        caption(fig, "a test figure", "anything")
    plt.close(fig)
    return fig


def test_every_series_gets_a_look_of_its_own():
    looks = styles([f"graph{i}" for i in range(12)])
    assert len({tuple(v.values()) for v in looks.values()}) == 12


def test_series_with_the_same_points_are_named_in_a_note_and_pass():
    series = {"react": [100, 80, 60], "plan_solve": [100, 70, 50], "create_agent": [100, 80, 60]}
    assert coinciding(series) == [["react", "create_agent"]]
    fig = figure(series)
    assert problems(fig) == []
    assert any("react = create_agent" in t.get_text() for t in fig.axes[0].texts)


def test_curves_drawn_alike_or_hidden_without_a_note_are_problems():
    fig = figure({"react": [100, 80, 60], "create_agent": [100, 80, 60]}, note=False)
    found = problems(fig)
    assert any("drawn alike" in p for p in found) and any("no note says so" in p for p in found)


def test_a_figure_without_its_box_is_a_problem():
    assert problems(figure({"react": [1, 2, 3]}, box=False)) == ["no 'what this shows and what it cannot' box"]


def test_the_family_figure_from_the_recorded_results_has_no_problem():
    records = []
    for path in RESULTS.glob("*/results.jsonl"):
        records += [r for r in map(json.loads, path.read_text().splitlines()) if any(
            t.startswith("family:") for t in r.get("tags") or [])]
    if not records:
        pytest.fail("notebooks/results holds no family runs: run .ci/update-notebooks")
    fig = family_figure(records, "families", shows="s", cannot="c")
    pyplot().close(fig)
    assert problems(fig) == []
    assert all(line.get_linestyle() == "None" for line in fig.axes[0].get_lines()
               if not line.get_label().startswith("_"))  # categories are not joined by lines


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_figure_a_notebook_draws_is_checked_and_boxed(path):
    cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
    for cell in cells:
        source = "".join(cell["source"])
        if "savefig" in source:
            assert "problems(fig)" in source and ("caption(" in source or "family_figure(" in source), source[:200]
