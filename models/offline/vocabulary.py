"""The offline model's word lists, read once from its data files (models/offline/data/*.json, in the wheel)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

_DATA = Path(__file__).with_name("data")


@cache
def _data_file(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((_DATA / f"{name}.json").read_text(encoding="utf-8"))
    return data


def word_list(name: str) -> Any:
    """One word list of words.json (a list, or a mapping from a word to its meaning)."""
    return _data_file("words")[name]


def city_rows() -> list[dict[str, Any]]:
    """The gazetteer of cities.json: each row's Chinese and English names, time zone and other names."""
    rows: list[dict[str, Any]] = _data_file("cities")["cities"]
    return rows
