"""The comparison's outputs: records as JSONL, a markdown summary (per graph, per tag) and PNG plots."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from reactgraph.evals.metrics import summarize

OFFLINE_NOTE = ("Offline numbers measure the graphs' control flow and robustness on a scripted model, "
                "not a language model's intelligence.")


def _pct(value: float) -> str:
    return f"{value * 100:.0f}%"


def _modes(modes: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in modes.items()) or "-"


def graph_table(summary: dict[str, Any]) -> str:
    """One row per graph: success rate and mean cost per run."""
    lines = [("| graph | runs | success | model calls | tool calls | tool failures | tokens in | tokens out "
              "| wall s | p95 s | iterations | failure modes |"),
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for name, a in summary["graphs"].items():
        lines.append(f"| {name} | {a['runs']} | {_pct(a['success_rate'])} | {a['model_calls']:.1f} | "
                     f"{a['tool_calls']:.1f} | {a['tool_failures']:.1f} | {a['tokens_in']:.0f} | "
                     f"{a['tokens_out']:.0f} | {a['wall_s']:.2f} | {a['p95_wall_s']:.2f} | {a['iterations']:.1f} | "
                     f"{_modes(a['failure_modes'])} |")
    return "\n".join(lines)


def tag_table(summary: dict[str, Any]) -> str:
    """Success rate per tag (rows) and graph (columns), with the number of runs."""
    graphs = list(summary["graphs"])
    lines = ["| tag | " + " | ".join(graphs) + " |", "| --- |" + " ---: |" * len(graphs)]
    for tag, per_graph in summary["tags"].items():
        cells = [f"{_pct(per_graph[g]['success_rate'])} ({per_graph[g]['runs']})" if g in per_graph else "-"
                 for g in graphs]
        lines.append(f"| {tag} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def markdown(records: list[dict[str, Any]], config: dict[str, Any] | None = None) -> str:
    """The summary as markdown: what ran, on which model, and the two tables."""
    summary = summarize(records)
    labels = sorted({r["model_label"] for r in records})
    config = config or {}
    faults = config.get("faults") or {}
    head = [f"# Comparison: {', '.join(summary['graphs'])}", "",
            f"- model: {'; '.join(labels)}",
            (f"- tasks: {len({r['task'] for r in records})} · repeats: {config.get('repeat', 1)} · "
             f"seed: {config.get('seed', 0)} · tool failure rate: {faults.get('failure_rate', 0):g} · "
             f"injected latency: {faults.get('latency_ms', 0):g} ms")]
    if any(r["model"].startswith("offline") for r in records):
        head.append(f"- {OFFLINE_NOTE}")
    return "\n".join([*head, "", "## Per graph (means per run)", "", graph_table(summary), "",
                      "## Success rate per tag (runs)", "", tag_table(summary), ""])


def plot(records: list[dict[str, Any]], out_dir: Path) -> list[Path]:
    """success.png (per graph), tags.png (per tag and graph), cost.png (model calls, tokens, wall time)."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display, works on CI and in a kernel alike
    import matplotlib.pyplot as plt

    summary = summarize(records)
    graphs = list(summary["graphs"])
    model = "; ".join(sorted({r["model"] for r in records}))
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []

    fig, ax = plt.subplots(figsize=(max(4, 1.6 * len(graphs)), 3.5))
    rates = [summary["graphs"][g]["success_rate"] * 100 for g in graphs]
    ax.bar(graphs, rates, color="#6c5ce7")
    for x, rate in enumerate(rates):
        ax.text(x, rate + 1, f"{rate:.0f}%", ha="center")
    ax.set(ylim=(0, 110), ylabel="success rate (%)", title=f"Success per graph · {model}")
    paths.append(_save(fig, out_dir / "success.png"))

    tags = list(summary["tags"])
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(tags) * max(1, len(graphs)) / 1.5), 4))
    width = 0.8 / max(1, len(graphs))
    for i, g in enumerate(graphs):
        values = [summary["tags"][t].get(g, {}).get("success_rate", 0) * 100 for t in tags]
        ax.bar([x + i * width for x in range(len(tags))], values, width, label=g)
    ax.set_xticks([x + width * (len(graphs) - 1) / 2 for x in range(len(tags))], tags, rotation=30, ha="right")
    ax.set(ylim=(0, 110), ylabel="success rate (%)", title=f"Success per tag · {model}")
    ax.legend(fontsize="small")
    paths.append(_save(fig, out_dir / "tags.png"))

    fig, axes = plt.subplots(1, 3, figsize=(max(9, 2.4 * len(graphs) * 1.5), 3.5))
    for ax, (key, label) in zip(axes, [("model_calls", "model calls / run"), ("tokens", "tokens / run"),
                                       ("wall_s", "wall time / run (s)")], strict=True):
        ax.bar(graphs, [summary["graphs"][g][key] for g in graphs], color="#00b894")
        ax.set_title(label)
        ax.tick_params(axis="x", rotation=20)
    fig.suptitle(f"Cost per graph · {model}")
    paths.append(_save(fig, out_dir / "cost.png"))
    return paths


def _save(fig: Any, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_report(records: list[dict[str, Any]], out_dir: str | Path, config: dict[str, Any] | None = None,
                 plots: bool = True) -> dict[str, Any]:
    """results.jsonl, summary.md, summary.json and the PNG plots in `out_dir`; returns their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    results = out / "results.jsonl"
    results.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    text = markdown(records, config)
    (out / "summary.md").write_text(text, encoding="utf-8")
    (out / "summary.json").write_text(json.dumps({"config": config or {}, **summarize(records)}, ensure_ascii=False,
                                                 indent=2), encoding="utf-8")
    return {"results": results, "summary": out / "summary.md", "summary_json": out / "summary.json",
            "markdown": text, "plots": plot(records, out) if plots else []}
