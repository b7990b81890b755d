"""The comparison's outputs: records as JSONL, a markdown summary (per graph with 95 % intervals, paired tests
between graphs, per tag) and PNG plots with error bars — and the same tables in the docs, made from a results file.

Every report says at its top what it measures: which model, from which provider, when, at what cost; and, for the
scripted model, that its numbers are the graphs' control flow under the scripted rules, not a model's quality.

The docs' tables are never typed: `.ci/update-compare-tables` rewrites each block between
`<!-- compare-tables: RESULTS -->` and `<!-- /compare-tables -->` (and the full report and figure beside RESULTS),
and tests/test_compare_tables.py fails when a page differs from what its results file gives.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from reactgraph.evals.bfcl import call_accuracy, call_section, notices
from reactgraph.evals.families import family_section
from reactgraph.evals.metrics import summarize
from reactgraph.evals.results_file import RESULTS, SETTINGS, ordered, read_records, rewrite_results
from reactgraph.evals.stats import ALPHA, mean_interval
from reactgraph.graph import parse_spec
from reactgraph.nodes.closing import RUN_STATUSES

SCRIPTED_NOTE = "control flow only — the scripted model's rules, not model quality"
SCRIPTED_PROVIDERS = ("offline", "test")


def provider_of(spec: str) -> str:
    try:
        return parse_spec(spec)[0]
    except ValueError:
        return "unknown"


def endpoint_of(model: Any) -> str | None:
    """Where a real model's requests go: the host (and port) of its base URL, nothing else (no path, no query,
    no credentials); None for the provider's default endpoint."""
    url = getattr(model, "openai_api_base", None) or getattr(model, "anthropic_api_url", None)
    if not url:
        return None
    parts = urlsplit(str(url))
    return f"{parts.hostname}:{parts.port}" if parts.port else parts.hostname


def run_dates(records: list[dict[str, Any]], config: dict[str, Any]) -> str:
    """The day(s) the runs finished on (UTC), from the records; else the day the comparison started."""
    days = sorted({str(r["finished_at"])[:10] for r in records if r.get("finished_at")})
    if not days:
        return str(config.get("started_at") or "unknown")[:10]
    return days[0] if len(days) == 1 else f"{days[0]} – {days[-1]}"


def cost_text(records: list[dict[str, Any]]) -> str:
    costs = [r.get("cost_usd") for r in records]
    if not records or any(c is None for c in costs):
        return "unknown (no price for this model: reactgraph.graph.register_price or $REACTGRAPH_PRICES)"
    return f"${sum(float(c or 0) for c in costs):.4f}"


def what_it_measures(records: list[dict[str, Any]], config: dict[str, Any]) -> list[str]:
    """The report's first lines (markdown list items) after the model line."""
    models = sorted({str(r["model"]) for r in records})
    scripted = bool(models) and all(provider_of(m) in SCRIPTED_PROVIDERS for m in models)
    endpoint = config.get("endpoint")
    providers = ", ".join(sorted({provider_of(m) for m in models})) + (f" at {endpoint}" if endpoint else "")
    lines = [f"- run on {run_dates(records, config)} (UTC) · provider: {providers or '-'} · "
             f"total cost: {cost_text(records)}"]
    if scripted:
        lines.append(f"- **{SCRIPTED_NOTE}**: every decision comes from the scripted offline model's rules")
    if config.get("stopped"):
        lines.append(f"- **{config['stopped']}**: {config.get('not_started', 0)} planned run(s) not started; "
                     f"`--resume` with a higher `--max-total-cost` runs them")
    if isinstance(resumed := config.get("resumed"), dict) and resumed.get("records"):
        began = f" begun {str(resumed['started_at'])[:16].replace('T', ' ')} UTC" if resumed.get("started_at") else ""
        lines.append(f"- resumed: {resumed['records']} of these runs were read back from the earlier run{began} "
                     "under the same settings, model and endpoint; the rest were made now")
    if isinstance(replayed := config.get("replayed_from"), str):
        lines.append(f"- replayed from the replies stored in {replayed[:300]}: no provider was asked; wall times "
                     "are the recording's")
    if isinstance(retried := config.get("retried_infra"), int):
        lines.append(f"- retried: {retried} infrastructure outcome(s) of the earlier run made again "
                     "(`--retry-infra`); every other run read back")
    return lines


def run_heading(records: list[dict[str, Any]], spec: str) -> str:
    """A notebook table's heading (markdown): the model, then what the runs measure (date, provider and where
    its server is, total cost; for the scripted model, that it is control flow only)."""
    endpoint = None
    if provider_of(spec) not in (*SCRIPTED_PROVIDERS, "unknown"):
        from reactgraph.graph import load_chat_model

        endpoint = endpoint_of(load_chat_model(spec))  # e.g. a local OpenAI-compatible server, not OpenAI's
    return "\n".join([f"**model: {spec}**", "", *what_it_measures(records, {"endpoint": endpoint})])


def _pct(value: float) -> str:
    return f"{value * 100:.0f}%"


def _rate(a: dict[str, Any]) -> str:
    """The success rate, or "-" when every run was left out (none judged)."""
    return "-" if a.get("judged", a["runs"]) == 0 else _pct(a["success_rate"])


def _modes(modes: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in modes.items()) or "-"


def _interval(a: dict[str, Any]) -> str:
    return f"{a['success_low'] * 100:.0f}–{a['success_high'] * 100:.0f}%"


def _p(value: float) -> str:
    return f"{value:.3f}" if value >= 0.001 else "<0.001"


def seed_text(seeds: list[int]) -> str:
    """1 → "1"; 1, 2, 3 → "1–3 (3)"; else the list."""
    if len(seeds) == 1:
        return str(seeds[0])
    if seeds == list(range(seeds[0], seeds[0] + len(seeds))):
        return f"{seeds[0]}–{seeds[-1]} ({len(seeds)})"
    return ", ".join(map(str, seeds))


def subtitle(records: list[dict[str, Any]], config: dict[str, Any] | None = None) -> str:
    """What a figure is about: suite, task count, fault rate, seeds and model."""
    config = config or {}
    rates = sorted({float(r.get("tool_failure_rate") or 0) for r in records})
    parts = [f"suite {config['suite']}"] if config.get("suite") else []
    parts += [f"{len({r['task'] for r in records})} tasks",
              f"tool failure rate {', '.join(f'{x:g}' for x in rates) or 0}",
              f"seeds {seed_text(sorted({int(r.get('seed') or 0) for r in records}))}",
              f"model {'; '.join(sorted({r['model'] for r in records}))}"]
    parts += [day for day in [run_dates(records, config)] if day != "unknown"]
    scripted = all(provider_of(str(r["model"])) in SCRIPTED_PROVIDERS for r in records)
    return " · ".join(parts) + (f"\n{SCRIPTED_NOTE}" if records and scripted else "")


def graph_table(summary: dict[str, Any]) -> str:
    """One row per graph: success rate with its 95 % interval, and mean cost per run."""
    lines = [("| graph | runs | success | 95% interval | model calls | tool calls | tool failures | tokens in "
              "| tokens out | wall s | p95 s | iterations | failure modes |"),
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for name, a in summary["graphs"].items():
        runs = f"{a['runs']} ({a['left_out']} left out)" if a.get("left_out") else str(a["runs"])
        lines.append(f"| {name} | {runs} | {_rate(a)} | {_interval(a)} | "
                     f"{a['model_calls']:.1f} | "
                     f"{a['tool_calls']:.1f} | {a['tool_failures']:.1f} | {a['tokens_in']:.0f} | "
                     f"{a['tokens_out']:.0f} | {a['wall_s']:.2f} | {a['p95_wall_s']:.2f} | {a['iterations']:.1f} | "
                     f"{_modes(a['failure_modes'])} |")
    return "\n".join(lines)


def status_table(summary: dict[str, Any]) -> str:
    """One row per graph: how many runs ended with each status (and a column for any other end, e.g. `timed_out`,
    so that every run is counted)."""
    other = sorted({s for a in summary["graphs"].values() for s in a.get("statuses") or {}} - set(RUN_STATUSES))
    columns = [*RUN_STATUSES, *other]
    lines = ["| graph | " + " | ".join(columns) + " |", "| --- |" + " ---: |" * len(columns)]
    for name, a in summary["graphs"].items():
        counts = a.get("statuses") or {}
        cells = [str(counts.get(s, 0)) for s in columns]
        if unchecked := a.get("answered_unchecked"):  # as the CLI's status line says it: coverage unchecked
            cells[columns.index("answered")] += f" ({unchecked} coverage unchecked)"
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plumbing_table(summary: dict[str, Any]) -> str:
    """One row per graph: the runs judged, those left out (infrastructure outcomes by kind, cut by the cost cap),
    and what the runs went through: a fallback plan, an unreadable check, format errors (and the runs they
    stopped)."""
    lines = ["| graph | judged | infrastructure | cut | fallback plans | unchecked | format errors |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, a in summary["graphs"].items():
        infra = a.get("infra") or {}
        kinds = f" ({_modes(infra)})" if infra else ""
        stops = f" ({a['format_stops']} runs stopped)" if a.get("format_stops") else ""
        lines.append(f"| {name} | {a.get('judged', a['runs'])} of {a['runs']} | {sum(infra.values())}{kinds} | "
                     f"{a.get('cut', 0)} | {a.get('fallback_plans', 0)} | {a.get('unchecked', 0)} | "
                     f"{a.get('format_errors', 0)}{stops} |")
    return "\n".join(lines)


PLUMBING_NOTE = ("Infrastructure outcomes (the provider's or the transport's failures: timeouts, 5xx, 429s past "
                 "the retries, context exceeded, no connection) and runs cut by the cost cap are left out of the "
                 "success rates and the paired tests; `--resume DIR --retry-infra` makes the infrastructure "
                 "outcomes again. Fallback plans, unchecked and format errors count runs (format errors: "
                 "unusable replies).")


def detectable_line(summary: dict[str, Any]) -> str:
    """The smallest difference the run's size can detect (the pair with the fewest judged runs), in words."""
    pairs = [p for p in summary["pairs"] if p.get("detectable")]
    if not pairs:
        return ""
    d = min(pairs, key=lambda p: p["runs"])["detectable"]
    if d["floor"] is None:
        return (f"Smallest detectable difference: none — {d['runs']} paired runs, and the exact test needs at least "
                f"{d['needed']} won by one graph and none by the other to reach p < {d['alpha']:g}.")
    return (f"Smallest detectable difference ({d['runs']} paired runs): a gap under {d['floor'] * 100:.0f} pts can "
            f"never be distinguishable from noise (p < {d['alpha']:g} takes {d['needed']} runs won by one graph and "
            f"none by the other), and at {d['power'] * 100:.0f}% power it takes {d['at_power'] * 100:.0f} pts even "
            "when one graph never does worse (docs/evals-and-compare.md).")


def pair_table(summary: dict[str, Any]) -> str:
    """One row per pair of graphs: who won which tasks, the paired test's p-value and the verdict."""
    lines = ["| a vs b | tasks | a better | b better | difference | p | p (Holm) | left out | verdict |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for pair in summary["pairs"]:
        lines.append(f"| {pair['a']} vs {pair['b']} | {pair['tasks']} | {pair['a_better']} | {pair['b_better']} | "
                     f"{pair['difference'] * 100:+.0f} pts | {_p(pair['p_value'])} | {_p(pair['p_holm'])} | "
                     f"{pair.get('left_out', 0)} | {pair['verdict']} |")
    return "\n".join(lines)


def verdicts(summary: dict[str, Any]) -> str:
    """The plain-language line under the pair table."""
    real = [p["verdict"] for p in summary["pairs"] if p["distinguishable"]]
    if not summary["pairs"]:
        return "One graph only: nothing to compare."
    if not real:
        return (f"No difference between the graphs is distinguishable from noise "
                f"(paired test, Holm-adjusted p < {ALPHA:g}).")
    return (f"Distinguishable from noise (Holm-adjusted p < {ALPHA:g}): {'; '.join(real)}. "
            "Every other difference is within the noise.")


def tag_table(summary: dict[str, Any]) -> str:
    """Success rate per tag (rows) and graph (columns), with the number of runs."""
    graphs = list(summary["graphs"])
    lines = ["| tag | " + " | ".join(graphs) + " |", "| --- |" + " ---: |" * len(graphs)]
    for tag, per_graph in summary["tags"].items():
        cells = [f"{_rate(per_graph[g])} ({per_graph[g]['runs']})" if g in per_graph else "-"
                 for g in graphs]
        lines.append(f"| {tag} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def markdown(records: list[dict[str, Any]], config: dict[str, Any] | None = None,
             summary: dict[str, Any] | None = None) -> str:
    """The summary as markdown: what ran, on which model, the per-graph, pair and per-tag tables."""
    summary = summary or summarize(records)
    labels = sorted({r["model_label"] for r in records})
    config = config or {}
    faults = config.get("faults") or {}
    suite = f"suite: {config['suite']} · " if config.get("suite") else ""
    head = [f"# Comparison: {', '.join(summary['graphs'])}", "",
            f"- model: {'; '.join(labels)}",
            (f"- {suite}tasks: {len({r['task'] for r in records})} · repeats: {config.get('repeat', 1)} · "
             f"seeds: {seed_text(summary['seeds'])} · tool failure rate: {faults.get('failure_rate', 0):g} · "
             f"injected latency: {faults.get('latency_ms', 0):g} ms")]
    head += what_it_measures(records, config)
    head += [f"- NOTICE: {notice}" for notice in notices(records)]  # the data's licence travels with its numbers
    methods = sorted({a["interval"] for a in summary["graphs"].values()})
    return "\n".join([*head, "", "## Per graph (means per run)", "", graph_table(summary), "",
                      f"95% interval of the success rate: {', '.join(methods)} (see evals/README.md).", "",
                      "## How the runs ended (status)", "", status_table(summary), "",
                      "## The model or the plumbing (runs per graph)", "", plumbing_table(summary), "",
                      PLUMBING_NOTE, "",
                      "## Are the differences real? (paired, on the same tasks, seeds and faults)", "",
                      pair_table(summary), "", verdicts(summary), *_line(detectable_line(summary)), "",
                      "## Success rate per tag (runs)", "", tag_table(summary), "", *family_section(records),
                      *call_section(records)])


def plot(records: list[dict[str, Any]], out_dir: Path, config: dict[str, Any] | None = None,
         summary: dict[str, Any] | None = None) -> list[Path]:
    """success.png (per graph), tags.png (per tag and graph), cost.png (model calls, tokens, wall time).

    Success bars carry their 95 % interval, cost bars ±1.96 standard errors of the mean; every figure has a
    subtitle naming the suite, task count, fault rate, seeds and model.
    """
    import matplotlib

    matplotlib.use("Agg")  # files only: no display, works on CI and in a kernel alike
    import matplotlib.pyplot as plt

    summary = summary or summarize(records)
    graphs = list(summary["graphs"])
    about = subtitle(records, config)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []

    fig, ax = plt.subplots(figsize=(max(6.4, 1.6 * len(graphs)), 3.8))
    per_graph = [summary["graphs"][g] for g in graphs]
    rates = [a["success_rate"] * 100 for a in per_graph]
    ax.bar(graphs, rates, color="#6c5ce7", yerr=_error_bars(per_graph), capsize=6, ecolor="#2d3436")
    for x, a in enumerate(per_graph):
        ax.text(x + 0.05, a["success_high"] * 100 + 1.5, f"{a['success_rate'] * 100:.0f}%", ha="left")
    ax.set(ylim=(0, 112), ylabel="success rate (%)")
    _titles(fig, ax, "Success per graph (error bars: 95% interval)", about)
    paths.append(_save(fig, out_dir / "success.png"))

    tags = list(summary["tags"])
    fig, ax = plt.subplots(figsize=(max(7, 0.9 * len(tags) * max(1, len(graphs)) / 1.5), 4.2))
    width = 0.8 / max(1, len(graphs))
    for i, g in enumerate(graphs):
        cells = [summary["tags"][t].get(g) for t in tags]
        present = [(x, c) for x, c in enumerate(cells) if c]
        ax.bar([x + i * width for x, _ in present], [c["success_rate"] * 100 for _, c in present], width, label=g,
               yerr=_error_bars([c for _, c in present]), capsize=2, error_kw={"elinewidth": 0.8})
    ax.set_xticks([x + width * (len(graphs) - 1) / 2 for x in range(len(tags))], tags, rotation=30, ha="right")
    ax.set(ylim=(0, 125), ylabel="success rate (%)")
    ax.legend(fontsize="small", ncol=max(1, len(graphs)), loc="upper center", frameon=False)
    _titles(fig, ax, "Success per tag (error bars: 95% interval)", about)
    paths.append(_save(fig, out_dir / "tags.png"))

    fig, axes = plt.subplots(1, 3, figsize=(max(9, 2.4 * len(graphs) * 1.5), 3.8))
    for ax, (key, label) in zip(axes, [("model_calls", "model calls / run"), ("tokens", "tokens / run"),
                                       ("wall_s", "wall time / run (s)")], strict=True):
        means, errors = zip(*(_mean_and_error([float(r[key]) for r in records if r["graph"] == g]) for g in graphs),
                            strict=True) if graphs else ((), ())
        ax.bar(graphs, means, color="#00b894", yerr=errors, capsize=4)
        ax.set_title(label)
        ax.tick_params(axis="x", rotation=20)
    fig.suptitle(f"Cost per graph (error bars: ±1.96 s.e. of the mean)\n{about}", fontsize="medium")
    paths.append(_save(fig, out_dir / "cost.png"))
    return paths


def _error_bars(aggregates: list[dict[str, Any]]) -> list[list[float]]:
    """matplotlib's asymmetric yerr (below, above) in percentage points, from the 95 % intervals."""
    return [[max(0.0, (a["success_rate"] - a["success_low"]) * 100) for a in aggregates],
            [max(0.0, (a["success_high"] - a["success_rate"]) * 100) for a in aggregates]]


def _mean_and_error(values: list[float]) -> tuple[float, float]:
    mean, _, high = mean_interval(values)
    return mean, high - mean


def _titles(fig: Any, ax: Any, title: str, about: str) -> None:
    fig.suptitle(title, fontsize="medium")
    ax.set_title(about, fontsize="small", color="#636e72")


def _save(fig: Any, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_report(records: list[dict[str, Any]], out_dir: str | Path, config: dict[str, Any] | None = None,
                 plots: bool = True, results: bool = True) -> dict[str, Any]:
    """results.jsonl (unless `results` is false: the caller keeps it), summary.md, summary.json and the PNG
    plots in `out_dir`; returns their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if results:
        rewrite_results(out / RESULTS, records)
    summary = summarize(records)  # once: the intervals bootstrap when tasks ran several times
    text = markdown(records, config, summary)
    (out / "summary.md").write_text(text, encoding="utf-8")
    extra = {"tool_call_accuracy": call_accuracy(records), "notices": notices(records)}
    (out / "summary.json").write_text(json.dumps({"config": config or {}, **summary, **extra}, ensure_ascii=False,
                                                 indent=2), encoding="utf-8")
    return {"results": out / RESULTS, "summary": out / "summary.md", "summary_json": out / "summary.json",
            "markdown": text, "plots": plot(records, out, config, summary) if plots else []}


BLOCK = re.compile(r"(^<!-- compare-tables: (?P<source>\S+) -->\n)(?P<body>.*?)(^<!-- /compare-tables -->$)",
                   re.M | re.S)
FIGURES = ("success.png",)  # the figures the docs show; the others stay out of the repository


def load(results: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A results file's records, in report order, and its run's settings (run.json beside it, if any)."""
    import json

    settings_path = results.parent / SETTINGS
    settings = json.loads(settings_path.read_text(encoding="utf-8")) if settings_path.is_file() else {}
    records, _ = read_records(results)
    return ordered(records, settings.get("graphs")), settings


def _compact_table(summary: dict[str, Any]) -> str:
    """Per graph: success with its interval, success on the compound tasks, mean calls, tokens, failure modes."""
    lines = ["| graph | success | 95% interval | compound tasks | model calls | tool calls | tokens in | "
             "failure modes |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    compound = summary["tags"].get("compound", {})
    for name, a in summary["graphs"].items():
        part = _rate(compound[name]) if name in compound else "-"
        modes = ", ".join(f"{k} {v}" for k, v in a["failure_modes"].items()) or "-"
        lines.append(f"| {name} | {_rate(a)} | {a['success_low'] * 100:.0f}–"
                     f"{a['success_high'] * 100:.0f}% | {part} | {a['model_calls']:.1f} | {a['tool_calls']:.1f} | "
                     f"{a['tokens_in']:.0f} | {modes} |")
    return "\n".join(lines)


def tables(records: list[dict[str, Any]], settings: dict[str, Any], source: str) -> str:
    """The block's markdown: what was measured, per graph, how the runs ended, and which gaps are real."""
    summary = summarize(records)
    return "\n".join([
        f"Generated from `{source}` by `python .ci/update-compare-tables` (do not edit by hand):", "",
        *what_it_measures(records, settings), "",
        _compact_table(summary), "", "How the same runs ended (`status`):", "", status_table(summary), "",
        "The model or the plumbing (runs per graph; infrastructure and cut runs are left out of the rates and "
        "tests):", "", plumbing_table(summary), "",
        "Which gaps are more than noise (paired on the same tasks and faults):", "", pair_table(summary), "",
        verdicts(summary), *_line(detectable_line(summary)), ""])


def _line(text: str) -> list[str]:
    """A paragraph of its own, or nothing."""
    return ["", text] if text else []


def render_page(text: str, root: Path) -> str:
    """The page with every compare-tables block made anew from the results file it names (relative to `root`)."""
    def block(match: re.Match[str]) -> str:
        source = match.group("source")
        records, settings = load(root / source)
        return match.group(1) + tables(records, settings, source) + match.group(4)

    return BLOCK.sub(block, text)


def write_reports(results: Path) -> list[Path]:
    """summary.md and the figures the docs show, beside the results file, made from it."""
    records, settings = load(results)
    with tempfile.TemporaryDirectory() as scratch:
        written = write_report(records, scratch, settings, plots=True, results=False)
        outputs = [results.parent / "summary.md"]
        shutil.copyfile(written["summary"], outputs[0])
        for name in FIGURES:
            shutil.copyfile(Path(scratch) / name, results.parent / name)
            outputs.append(results.parent / name)
    return outputs


def sources(text: str) -> list[str]:
    return [m.group("source") for m in BLOCK.finditer(text)]


__all__ = ["RESULTS", "load", "render_page", "sources", "tables", "write_reports"]
