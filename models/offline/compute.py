"""Arithmetic for the scripted offline model: the expression a question holds, and the parts computed from others.

An expression may be written in symbols or in words, Chinese or English ("三乘以四", "the square root of 144",
"15% of 80"); it is rewritten into symbols, checked by the calculator's own evaluator (so the model never proposes
what the tool refuses) and written with one canonical spacing, and a result is written as people write it (126,
not 126.0). Some parts of a question are computed from other parts' results: a `diff` task waits on the weather of
two cities and then asks the calculator for their difference or ratio, optionally scaled ("北京和上海的温差乘以3"),
while a `vs` task waits on a calculation and a weather and decides without a tool whether the number is more than
the temperature, since comparing two numbers needs none.
"""

from __future__ import annotations

import re
from typing import Any

from reactgraph.tools.builtin.calculator import evaluate_python
from reactgraph.tools.call import ToolInputError

from .words import normalize, word_list

_NUM = r"\d+(?:\.\d+)?"
_CN_DIGITS: dict[str, int] = word_list("chinese_digits")
_CN_UNITS: dict[str, int] = word_list("chinese_units")
_CN_BIG: dict[str, int] = word_list("chinese_big_units")
_CN_NUMERAL = "[零〇一二两三四五六七八九十百千万亿]+"
_CN_OPERATORS = r"加上|加|减去|减|乘以|乘上|乘|除以|的平方根|的平方|的立方|次方|次幂|的"

# Word forms rewritten to symbols, applied in order (most specific first).
_REWRITES: tuple[tuple[str, str], ...] = (
    (rf"(?:the\s+)?square\s+root\s+of\s*({_NUM})", r"(\1 ** 0.5)"),
    (rf"(?:the\s+)?cube\s+root\s+of\s*({_NUM})", r"(\1 ** (1 / 3))"),
    (rf"sqrt\s*\(?\s*({_NUM})\s*\)?", r"(\1 ** 0.5)"),
    (rf"根号\s*({_NUM})", r"(\1 ** 0.5)"),
    (rf"({_NUM})\s*的\s*(?:算术)?平方根", r"(\1 ** 0.5)"),
    (rf"({_NUM})\s*的\s*立方根", r"(\1 ** (1 / 3))"),
    (rf"({_NUM})\s*开平?方", r"(\1 ** 0.5)"),
    (rf"({_NUM})\s*的\s*({_NUM})\s*次(?:方|幂)", r"\1 ** \2"),
    (rf"({_NUM})\s*(?:to\s+the\s+power\s+of|raised\s+to(?:\s+the\s+power\s+of)?|to\s+the)\s*({_NUM})"
     r"(?:st|nd|rd|th)?(?:\s+power)?", r"\1 ** \2"),
    (rf"({_NUM})\s*的\s*平方", r"\1 ** 2"),
    (rf"({_NUM})\s*的\s*立方", r"\1 ** 3"),
    (rf"({_NUM})\s*squared", r"\1 ** 2"),
    (rf"({_NUM})\s*cubed", r"\1 ** 3"),
    (rf"({_NUM})\s*(?:%|percent)\s*of\s*({_NUM})", r"\1 / 100 * \2"),
    (rf"({_NUM})\s*的\s*({_NUM})\s*%", r"\1 * \2 / 100"),
    (r"加上|加", " + "), (r"减去|减", " - "), (r"乘以|乘上|乘", " * "), (r"除以", " / "),
    (r"\bplus\b", " + "), (r"\bminus\b", " - "), (r"\b(?:times|multiplied\s+by)\b", " * "),
    (r"\bdivided\s+by\b", " / "), (r"(?<=\d)\s+over\s+(?=\d)", " / "), (r"\bmod(?:ulo)?\b", " % "),
    (r"(?<=\d)\s*[x·]\s*(?=[\d(])", " * "),
)
_TOKEN = re.compile(rf"\*\*|{_NUM}|[-+*/%()]")
_RUN = re.compile(r"[\d.\s+\-*/()%]+")
_BINARY = ("+", "-", "*", "/", "%", "**")


def chinese_numeral(text: str) -> int | None:
    """Value of a Chinese numeral such as 一百二十三 or 两万五千; None when it is not one."""
    if not text or any(ch not in _CN_DIGITS and ch not in _CN_UNITS and ch not in _CN_BIG for ch in text):
        return None
    total, section, digit = 0, 0, None
    for ch in text:
        if ch in _CN_DIGITS:
            digit = _CN_DIGITS[ch]
        elif ch in _CN_UNITS:
            section += (1 if digit is None else digit) * _CN_UNITS[ch]
            digit = None
        else:
            section += digit or 0
            total += (section or 1) * _CN_BIG[ch]
            section, digit = 0, None
    return total + section + (digit or 0)


def _convert_chinese_numerals(text: str) -> str:
    """Chinese numerals next to an arithmetic word become digits (三乘以四 -> 3乘以4); others stay."""
    if not re.search(r"[加减乘除]|次方|次幂|平方|立方|开方|根号", text):
        return text

    def digits(numeral: str) -> str:
        value = chinese_numeral(numeral)
        return numeral if value is None else str(value)

    text = re.sub(rf"{_CN_NUMERAL}(?=\s*(?:{_CN_OPERATORS}))", lambda m: digits(m.group(0)), text)
    return re.sub(rf"(?<=[加减乘以上去的号])(\s*)({_CN_NUMERAL})", lambda m: m.group(1) + digits(m.group(2)), text)


def rewrite_words(text: str) -> str:
    """The text with word-form arithmetic turned into symbols; other words are left in place."""
    out = normalize(text)
    out = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", out)
    out = out.replace("×", "*").replace("÷", "/").replace("−", "-").replace("–", "-").replace("^", " ** ")
    out = _convert_chinese_numerals(out)
    for pattern, repl in _REWRITES:
        out = re.sub(pattern, repl, out, flags=re.I)
    return out


def is_valid(expression: str) -> bool:
    """Whether the text is a well-formed expression the calculator accepts (its value may still be undefined,
    e.g. 7 / 0): checked by the calculator's own evaluator, so the model never proposes what the tool refuses."""
    try:
        evaluate_python(expression)
    except ToolInputError as exc:
        return "division by zero" in str(exc)
    return True


def canonical(expression: str) -> str:
    """One spacing for every expression: "(15+27)*3" and "( 15 + 27 ) * 3" both give "(15 + 27) * 3"."""
    parts: list[str] = []
    prev: str | None = None
    prev_unary = False
    for tok in _TOKEN.findall(expression):
        unary = tok in "+-" and (prev is None or prev == "(" or prev in _BINARY)
        parts.append(tok if prev is None or prev == "(" or tok == ")" or prev_unary else " " + tok)
        prev, prev_unary = tok, unary
    return "".join(parts)


def compact(expression: str) -> str:
    """The expression without spaces: a second spelling to retry a calculator that rejected the first."""
    return re.sub(r"\s+", "", expression)


def _trim(run: str) -> str:
    """A candidate run without dangling operators and with its parentheses balanced."""
    strip = re.compile(r"^[+*/%.\s]+|[-+*/%.\s]+$")
    run = strip.sub("", run)
    while run.count(")") > run.count("("):
        idx = run.rindex(")") if not run.startswith(")") else 0
        run = strip.sub("", run[:idx] + run[idx + 1:])
    while run.count("(") > run.count(")"):
        run = strip.sub("", run[1:]) if run.startswith("(") else run + ")"
    return run


def find_expression(text: str) -> str | None:
    """The longest valid arithmetic expression in the text (after word forms), canonical; None if absent."""
    rewritten = rewrite_words(text)
    best: str | None = None
    for match in _RUN.finditer(rewritten):
        run = _trim(match.group(0))
        numbers = re.findall(_NUM, run)
        if len(numbers) < 2 or not re.search(r"\d\s*(?:\*\*|[-+*/%])\s*-?\s*[\d(]|\)\s*(?:\*\*|[-+*/%])", run):
            continue
        if not is_valid(canonical(run)):
            continue
        if best is None or len(run) > len(best):
            best = run
    if not best:
        return None
    expression = canonical(best)
    # "(144 ** 0.5)" -> "144 ** 0.5": drop parentheses that wrap the whole expression.
    while expression.startswith("(") and expression.endswith(")") and _balanced(expression[1:-1]):
        expression = expression[1:-1]
    return expression


def _balanced(text: str) -> bool:
    depth = 0
    for ch in text:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth < 0:
            return False
    return depth == 0


def format_number(value: object) -> str:
    """A result as people write it: 126 not 126.0, 0.3333333333 not 0.33333333333333331, no separators."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    if isinstance(value, float):
        return f"{value:.10g}"
    return str(value)


def as_number(value: object) -> float | int | None:
    """A calculator result as a number (it may arrive as int, float or numeric string)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    try:
        number = float(str(value).replace(",", ""))
    except ValueError:
        return None
    return int(number) if number.is_integer() else number


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
