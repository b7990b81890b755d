"""What a report measures, said at its top: which model, from which provider, when, at what cost — and, for the
scripted model, that its numbers are the graphs' control flow under the scripted rules, not a model's quality."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from reactgraph.graph import parse_spec

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
    return lines


def run_heading(records: list[dict[str, Any]], spec: str) -> str:
    """A notebook table's heading (markdown): the model, then what the runs measure (date, provider and where
    its server is, total cost; for the scripted model, that it is control flow only)."""
    endpoint = None
    if provider_of(spec) not in (*SCRIPTED_PROVIDERS, "unknown"):
        from reactgraph.graph import load_chat_model

        endpoint = endpoint_of(load_chat_model(spec))  # e.g. a local OpenAI-compatible server, not OpenAI's
    return "\n".join([f"**model: {spec}**", "", *what_it_measures(records, {"endpoint": endpoint})])
