"""What a turn used, as `ask` shows it (the panel's token count) and prints it (`--json`'s `usage`)."""

from __future__ import annotations

from typing import Any


def usage_totals(result: dict[str, Any]) -> dict[str, Any]:
    """What the turn used, from its `usage` channel (every model call, the provider's count or the estimate):
    tokens in, out and in all, model calls' seconds, tool calls and cost. A state without the channel (a run
    from before it existed) counts its steps' tokens."""
    usage = result.get("usage") or {}
    tokens_in, tokens_out = int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0))
    total = tokens_in + tokens_out or sum(int(s.get("tokens", 0)) for s in result.get("steps", []))
    return {"input_tokens": tokens_in, "output_tokens": tokens_out, "total_tokens": total,
            "model_seconds": round(float(usage.get("model_seconds", 0.0)), 3),
            "tool_calls": int(usage.get("tool_calls", 0)), "cost_usd": float(usage.get("cost_usd", 0.0))}
