"""Parts of a question computed from other parts' results: a temperature difference or ratio (optionally scaled,
"北京和上海的温差乘以3"), and whether a computed number is more than a city's temperature.

A `diff` task waits on the weather of its two cities and then asks the calculator; a `vs` task waits on a
calculation and a weather and is decided without a tool (comparing two numbers needs none).
"""

from __future__ import annotations

import re
from typing import Any

from .arith import as_number, chinese_numeral, format_number

DIFF = re.compile(r"温差|相差|差多少|差几度|差距|(?:低|高|冷|热|暖)多少|(?:低|高|冷|热|暖)了?几度|"
                  r"\b(?:difference|how much (?:warmer|colder|hotter|cooler|higher|lower))\b", re.I)
RATIO = re.compile(r"几倍|多少倍|的倍数|比值|\bratio\b|\bhow many times\b", re.I)
_FACTOR = re.compile(r"(?:乘以|乘上|乘|\btimes\b|\bmultipl(?:y|ied)(?: it| that| the \w+)? by\b|[*×])\s*"
                     r"(\d+(?:\.\d+)?|[一二两三四五六七八九十]+)", re.I)
MORE = re.compile(r"(?:超过|大于|高于|多于|比[^?？，,]{0,12}(?:高|大|多|低|小|少))|"
                  r"\b(?:more|greater|bigger|higher|larger|less|lower|smaller|fewer|warmer|colder)\s+than\b", re.I)
# "…，然后乘以3" / "then multiply it by 2": a clause that only scales the result before it (no task of its own).
FOLLOW_ON = re.compile(r"^(?:然后|再|并且|and\s+)?(?:把(?:它|结果|温差)|将(?:它|结果))?\s*(?:再)?"
                       r"(?:乘以|乘上|乘)\s*\S+|^(?:and\s+)?(?:then\s+)?multiply\b", re.I)
LOCAL_KINDS = frozenset({"vs"})


def _factor(clause: str) -> str | None:
    match = _FACTOR.search(clause)
    if not match:
        return None
    raw = match.group(1)
    value = chinese_numeral(raw) if not raw[0].isdigit() else raw
    return None if value is None else str(value)


def derived(clauses: list[str], tasks: list[Any], make: Any) -> list[Any]:
    """The derived tasks the clauses ask for, built with `make(key, kind, params, needs)`."""
    weather = [t for t in tasks if t.kind == "weather" and t.params.get("city")]
    calcs = [t for t in tasks if t.kind == "calc"]
    found: list[Any] = []
    text = " ".join(clauses)
    if len(weather) >= 2 and (DIFF.search(text) or RATIO.search(text)):
        pair = weather[:2]
        op = "ratio" if RATIO.search(text) and not DIFF.search(text) else "diff"
        found.append(make(f"{op}:{pair[0].params['city']}:{pair[1].params['city']}", "diff",
                          {"cities": [t.params["city"] for t in pair], "op": op, "factor": _factor(text)},
                          tuple(t.key for t in pair)))
    follow = [c for c in clauses if FOLLOW_ON.search(c)]
    if not found and calcs and follow and _factor(follow[0]):
        found.append(make(f"scale:{calcs[-1].key}", "diff", {"cities": [], "op": "scale", "factor": _factor(follow[0]),
                                                             "expression": calcs[-1].params["expression"]},
                          (calcs[-1].key,)))
    if calcs and weather:
        for clause in clauses:
            if MORE.search(clause) and any(t.params["city"].lower() in clause.lower() for t in weather):
                city = next(t for t in weather if t.params["city"].lower() in clause.lower())
                found.append(make(f"vs:{calcs[0].key}:{city.key}", "vs",
                                  {"city": city.params["city"], "expression": calcs[0].params["expression"]},
                                  (calcs[0].key, city.key)))
                break
    return found


def temperature(value: Any) -> float | None:
    t = value.get("temperature_c") if isinstance(value, dict) else None
    return float(t) if isinstance(t, (int, float)) and not isinstance(t, bool) else None


def diff_expression(task: Any, values: list[Any]) -> str | None:
    """The calculator expression of a diff task from its cities' weather (None: a temperature is unknown)."""
    if task.params["op"] == "scale":
        number = as_number(values[0])
        return None if number is None else f"{format_number(number)} * {task.params['factor']}"
    temps = [temperature(v) for v in values]
    if any(t is None for t in temps):
        return None
    a, b = (format_number(t) for t in temps)
    if task.params["op"] == "ratio":
        core = f"{a} / {b}"
    else:
        high, low = sorted(temps, reverse=True)  # type: ignore[type-var]
        core = f"{format_number(high)} - {format_number(low)}"
    factor = task.params.get("factor")
    return f"({core}) * {factor}" if factor else core


def vs_value(number: Any, weather: Any) -> dict[str, Any] | None:
    """A computed number against a city's temperature: both, and which is larger."""
    n, t = as_number(number), temperature(weather)
    if n is None or t is None:
        return None
    return {"number": n, "temperature": t, "sign": (n > t) - (n < t)}


def diff_line(task: Any, expression: str, value: Any, lang: str) -> str:
    result = format_number(value)
    if task.params["op"] == "scale":
        return (f"再乘以 {task.params['factor']}：{expression} = {result}。" if lang == "zh"
                else f"Multiplied by {task.params['factor']}: {expression} = {result}.")
    a, b = task.params["cities"]
    if task.params["op"] == "ratio":
        return (f"{a}的气温是{b}的 {result} 倍（{expression} = {result}）。" if lang == "zh"
                else f"The temperature in {a} is {result} times that in {b} ({expression} = {result}).")
    if task.params.get("factor"):
        return (f"{a}和{b}的温差乘以 {task.params['factor']}：{expression} = {result}。" if lang == "zh"
                else f"The temperature difference between {a} and {b} times {task.params['factor']}: "
                     f"{expression} = {result}.")
    return (f"{a}和{b}的温差是 {result}°C（{expression} = {result}）。" if lang == "zh"
            else f"The temperature difference between {a} and {b} is {result}°C ({expression} = {result}).")


def vs_line(task: Any, value: dict[str, Any], lang: str) -> str:
    n, t, city = format_number(value["number"]), format_number(value["temperature"]), task.params["city"]
    if lang == "zh":
        word = {1: "大于", 0: "等于", -1: "小于"}[value["sign"]]
        return f"{n} {word}{city}的气温（{t}°C）。"
    word = {1: "Yes: it is more than", 0: "No: it equals", -1: "No: it is less than"}[value["sign"]]
    return f"{word} the temperature in {city} ({n} vs {t}°C)."


def diff_label(task: Any, lang: str) -> str:
    factor = task.params.get("factor")
    if task.params["op"] == "scale":
        return (f"{task.params['expression']} 的结果乘以 {factor}" if lang == "zh"
                else f"the result of {task.params['expression']} times {factor}")
    a, b = task.params["cities"]
    if task.params["op"] == "ratio":
        return f"{a}与{b}的气温之比" if lang == "zh" else f"the ratio of the temperatures in {a} and {b}"
    if lang == "zh":
        return f"{a}和{b}的温差" + (f"乘以 {factor}" if factor else "")
    return f"the temperature difference between {a} and {b}" + (f" times {factor}" if factor else "")


def vs_label(task: Any, lang: str) -> str:
    city = task.params["city"]
    return (f"{task.params['expression']} 与{city}气温的比较" if lang == "zh"
            else f"whether {task.params['expression']} is more than the temperature in {city}")
