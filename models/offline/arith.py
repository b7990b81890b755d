"""Arithmetic in questions: find an expression (symbols or words, Chinese or English) and write it canonically."""

from __future__ import annotations

import re

from reactgraph.tools.builtin.calculator import evaluate_python
from reactgraph.tools.call import ToolInputError

from .lexicon import normalize
from .vocabulary import word_list

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
