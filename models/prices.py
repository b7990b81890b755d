"""Model prices: USD per million input and output tokens, for the cost of a run (`Usage.cost_usd`, held against
`Context.max_cost_usd`) and of a comparison (evals/spend.py). A built-in table of the providers' published
prices, extended in code (`register_price`, re-exported as `reactgraph.graph.register_price`) or by a JSON file
named by $REACTGRAPH_PRICES, whose entries win; the file is read once per version of it, bounded, and each entry
checked (a price file is input)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from reactgraph.errors import ReactGraphError

PRICES_ENV = "REACTGRAPH_PRICES"  # a JSON file {"<provider>:<model>": {"input": usd_per_m, "output": usd_per_m}}
MAX_PRICES_BYTES = 1_000_000
# USD per million (input, output) tokens, as published by the providers (2025); the offline model is free.
# Extend with `register_price` or a JSON file named by $REACTGRAPH_PRICES (its entries win).
PRICES: dict[str, tuple[float, float]] = {
    "offline": (0.0, 0.0),
    "openai:gpt-4o": (2.50, 10.00),
    "openai:gpt-4o-mini": (0.15, 0.60),
    "openai:gpt-4.1": (2.00, 8.00),
    "openai:gpt-4.1-mini": (0.40, 1.60),
    "openai:gpt-4.1-nano": (0.10, 0.40),
    "openai:o4-mini": (1.10, 4.40),
    "anthropic:claude-3-5-haiku-latest": (0.80, 4.00),
    "anthropic:claude-sonnet-4-0": (3.00, 15.00),
    "anthropic:claude-opus-4-0": (15.00, 75.00),
}


class InvalidPrices(ReactGraphError, ValueError):
    """The price file named by $REACTGRAPH_PRICES cannot be read or holds an entry that is not a price."""


def register_price(model: str, input_usd_per_m: float, output_usd_per_m: float) -> None:
    """Add or replace a model's price (USD per million input / output tokens), e.g. for a local server's model."""
    PRICES[model] = _price(model, {"input": input_usd_per_m, "output": output_usd_per_m})


def _price(model: str, entry: Any) -> tuple[float, float]:
    ok = isinstance(entry, Mapping) and all(
        isinstance(entry.get(k), int | float) and not isinstance(entry.get(k), bool) and 0 <= entry[k] <= 10_000
        for k in ("input", "output"))
    if not ok:
        raise InvalidPrices(f"price of {model[:100]!r} must be {{\"input\": usd_per_m, \"output\": usd_per_m}}, "
                            "each a number from 0 to 10000")
    return float(entry["input"]), float(entry["output"])


def _file_prices() -> dict[str, tuple[float, float]]:
    path = os.environ.get(PRICES_ENV, "").strip()
    if not path:
        return {}
    try:
        stat = Path(path).stat()
    except OSError:
        stat = None
    # read once per version of the file, not on every model call
    return _read_prices(path, (stat.st_mtime_ns, stat.st_size) if stat else None)


@lru_cache(maxsize=8)
def _read_prices(path: str, version: tuple[int, int] | None) -> dict[str, tuple[float, float]]:
    try:
        with Path(path).open("rb") as handle:  # bounded: a price list is small
            raw = handle.read(MAX_PRICES_BYTES + 1)
        if len(raw) > MAX_PRICES_BYTES:
            raise InvalidPrices(f"{PRICES_ENV}={path}: larger than {MAX_PRICES_BYTES:,} bytes")
        table = json.loads(raw)
    except (OSError, ValueError, RecursionError) as exc:
        if isinstance(exc, InvalidPrices):
            raise
        raise InvalidPrices(f"{PRICES_ENV}={path}: cannot be read as JSON ({type(exc).__name__})") from None
    if not isinstance(table, dict):
        raise InvalidPrices(f"{PRICES_ENV}={path}: expected a JSON object of model → price")
    return {str(model): _price(str(model), entry) for model, entry in table.items()}


def price_of(model: str) -> tuple[float, float] | None:
    """A model spec's (input, output) USD per million tokens; None when no table knows it."""
    if not model:
        return None
    file, bare = _file_prices(), model.split(":", 1)[-1]  # the file's entries win over the built-in ones
    return file.get(model) or PRICES.get(model) or file.get(bare) or PRICES.get(bare)
