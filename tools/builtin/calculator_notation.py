"""How the calculator reads human notation: ×, ÷, ^, superscript powers, full-width and other digits, 1,000, 15%,
a trailing "=" or "等于多少", all rewritten into the Python syntax its evaluator accepts."""

from __future__ import annotations

import re
import unicodedata

from reactgraph.tools.call import ToolInputError

# Checked on the raw text before anything else, so a 10 MB string costs one len().
MAX_EXPRESSION_CHARS = 1_000

_SYMBOLS = str.maketrans({"×": "*", "✕": "*", "✖": "*", "⨯": "*", "∗": "*", "·": "*", "⋅": "*",
                          "÷": "/", "∕": "/", "−": "-", "–": "-", "—": "-",
                          "٫": ".", "٬": ",", "٪": "%",  # Arabic decimal and thousands separators, percent
                          "$": None, "¥": None, "€": None, "£": None})
# A run of superscripts is an exponent (2² = 2**2); read before NFKC, which would make 2² into 22.
_SUPERSCRIPT_RUN = re.compile("[⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁽⁾]+")
_SUPERSCRIPTS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁽⁾", "0123456789+-()")
_TRAILING_QUESTION = re.compile(r"(?:\s|=|\?|等于|是多少|多少|几|呢|吗)+$")
_RADIX_LITERAL = re.compile(r"(?<![\w.])0[xXoObB][0-9a-fA-F_]")
# "3x4", "3 x (1+2)": an x between a number/closing bracket and a number/opening bracket.
_TIMES_X = re.compile(r"(?<=[\d)])\s*[xX]\s*(?=[\d(.])")
# "2(3+4)" and "(1+2)(3+4)": a number or closing bracket directly before an opening bracket.
_IMPLICIT_TIMES = re.compile(r"((?<![\w.])\d+(?:\.\d*)?|\))\s*\((?!\s*\))")
# "15%" at the end of a term is a percentage; "10 % 3" (followed by an operand) stays modulo.
_PERCENT = re.compile(r"(?<![\w.])(\d+(?:\.\d*)?|\.\d+)\s*%(?!\s*[\w(.])")


def _exponent(run: re.Match[str]) -> str:
    power = run.group().translate(_SUPERSCRIPTS)
    return f"**{power}" if power.isdigit() else f"**({power})"


def superscripts_as_powers(text: str) -> str:
    """Each run of superscripts as a power (`10³` → `10**3`), as it must be read before NFKC makes it 103."""
    return _SUPERSCRIPT_RUN.sub(_exponent, text)


def _plain_digits(expression: str) -> str:
    """Superscript runs become exponents and decimal digits (full-width, Arabic-Indic…) ASCII ones; other
    characters NFKC turns into digits (₂ ① ½ ⒈) are refused: glued to the digits beside them they misread."""
    text = superscripts_as_powers(expression)
    for char in {c for c in text if not c.isascii() and unicodedata.category(c) != "Nd"}:
        if any(c.isdigit() for c in unicodedata.normalize("NFKC", char)):
            raise ToolInputError(f"{char!r} ({unicodedata.name(char, 'a numeric symbol').lower()}) is not a plain "
                                 "number: write it with digits and operators, e.g. 1/2 or 2**3")
    return "".join(str(unicodedata.decimal(c, c)) for c in unicodedata.normalize("NFKC", text))


def normalise(expression: str) -> str:
    """Rewrite common human notation (×, ÷, ^, 2², full-width and other digits, 1,000, 15%) into Python syntax."""
    text = _plain_digits(expression).translate(_SYMBOLS)
    # NFKC can lengthen text (one ligature becomes many characters), so check again.
    if len(text) > MAX_EXPRESSION_CHARS:
        raise ToolInputError(f"expression is too long (limit {MAX_EXPRESSION_CHARS} characters)")
    text = _TRAILING_QUESTION.sub("", text.strip()).strip()
    if _RADIX_LITERAL.search(text):
        raise ToolInputError("hexadecimal, octal and binary literals are not supported; use decimal")
    text = _TIMES_X.sub("*", text.replace("^", "**"))
    text = _PERCENT.sub(r"(\1/100)", text)
    text = _IMPLICIT_TIMES.sub(r"\1*(", text)
    return _drop_thousands_separators(text)


def _drop_thousands_separators(text: str) -> str:
    """Remove the commas in 1,000 / 12,345,678, but never inside a function call's brackets.

    Inside max(1,000) the comma separates arguments; elsewhere a comma followed by exactly three
    digits can only be a thousands separator (a bare tuple would be refused anyway).
    """
    out: list[str] = []
    in_call: list[bool] = []
    for i, char in enumerate(text):
        if char in "([{":
            before = text[:i].rstrip()
            in_call.append(char == "(" and bool(before) and (before[-1].isalnum() or before[-1] == "_"))
        elif char in ")]}" and in_call:
            in_call.pop()
        elif (char == "," and not (in_call and in_call[-1]) and i > 0 and text[i - 1].isdigit()
              and re.match(r"\d{3}(?!\d)", text[i + 1:i + 5])):
            continue
        out.append(char)
    return "".join(out)
