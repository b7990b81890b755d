"""`calculator`: safe arithmetic on a whitelisted subset of Python expression syntax."""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any

from reactgraph.tools.builtin.calculator_notation import MAX_EXPRESSION_CHARS, normalise
from reactgraph.tools.call import ToolInputError
from reactgraph.tools.meta import ToolMeta

PARSE_ATTEMPTS = 3
# Bracket depth, checked before ast.parse: CPython's parser fails badly on very deep nesting.
MAX_NESTING = 100
# Syntax-tree depth, so the recursive evaluator stays far from Python's recursion limit.
MAX_TREE_DEPTH = 400
# Exponents are refused above this before any power is computed (9**9**9 is refused at once).
MAX_EXPONENT = 1_000
MAX_INT_DIGITS = 1_000
MAX_FACTORIAL = 1_000
MAX_ROUND_DIGITS = 100
_INT_LIMIT = 10**MAX_INT_DIGITS
# Integral floats below this are returned as ints (8/2 -> 4); beyond it floats are not exact.
_EXACT_FLOAT_LIMIT = 2**53


def _factorial(n: int | float) -> int:
    if isinstance(n, float) and not n.is_integer():
        raise ToolInputError(f"factorial needs a whole number, got {n}")
    n = int(n)
    if not 0 <= n <= MAX_FACTORIAL:
        raise ToolInputError(f"factorial is limited to 0..{MAX_FACTORIAL}, got {n}")
    digits = int(math.lgamma(n + 1) / math.log(10)) + 1
    if digits > MAX_INT_DIGITS:
        raise ToolInputError(f"factorial({n}) has about {digits} digits (limit {MAX_INT_DIGITS})")
    return math.factorial(n)


def _round(x: int | float, ndigits: int | None = None) -> int | float:
    if ndigits is not None and (not isinstance(ndigits, int) or abs(ndigits) > MAX_ROUND_DIGITS):
        raise ToolInputError(f"round: digits must be a whole number within ±{MAX_ROUND_DIGITS}")
    return round(x, ndigits)


def _power(base: int | float, exponent: int | float) -> int | float:
    if abs(exponent) > MAX_EXPONENT:
        shown = f" {exponent:g}" if abs(exponent) < 1e15 else ""
        raise ToolInputError(f"exponent{shown} is too large (limit ±{MAX_EXPONENT})")
    if isinstance(base, int) and isinstance(exponent, int) and exponent > 0 and abs(base) > 1:
        digits = exponent * math.log10(abs(base))
        if digits > MAX_INT_DIGITS:
            raise ToolInputError(
                f"result would have about {digits:,.0f} digits (limit {MAX_INT_DIGITS})")
    return base**exponent


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "sqrt": math.sqrt, "log": math.log, "ln": math.log, "log10": math.log10, "log2": math.log2,
    "exp": math.exp, "sin": math.sin, "cos": math.cos, "tan": math.tan, "asin": math.asin,
    "acos": math.acos, "atan": math.atan, "floor": math.floor, "ceil": math.ceil,
    "factorial": _factorial, "abs": abs, "round": _round, "min": lambda *a: min(a),
    "max": lambda *a: max(a), "pow": _power, "hypot": math.hypot, "degrees": math.degrees,
    "radians": math.radians,
}
CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e, "tau": math.tau}

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: _power,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_FORBIDDEN_NAMES = {
    ast.Attribute: "attribute access", ast.Subscript: "subscripts", ast.Tuple: "tuples",
    ast.List: "lists", ast.Dict: "dicts", ast.Set: "sets", ast.Compare: "comparisons",
    ast.BoolOp: "and/or", ast.Lambda: "lambda", ast.IfExp: "if/else", ast.NamedExpr: "assignment",
    ast.JoinedStr: "f-strings", ast.ListComp: "comprehensions", ast.SetComp: "comprehensions",
    ast.DictComp: "comprehensions", ast.GeneratorExp: "comprehensions", ast.Starred: "unpacking",
}
_CONSTANT_KINDS = {str: "strings", bytes: "bytes", bool: "True/False", complex: "complex numbers",
                   type(None): "None", type(...): "..."}


def _check_nesting(text: str) -> None:
    depth = 0
    for char in text:
        if char in "([{":
            depth += 1
            if depth > MAX_NESTING:
                raise ToolInputError(f"expression is nested too deeply (limit {MAX_NESTING} brackets)")
        elif char in ")]}":
            depth -= 1


def _validate(tree: ast.Expression, source: str) -> None:
    """Refuse anything outside the whitelist before a single operation is evaluated."""
    stack: list[tuple[ast.AST, int]] = [(tree.body, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_TREE_DEPTH:
            raise ToolInputError(f"expression is too complex (more than {MAX_TREE_DEPTH} levels)")
        if isinstance(node, ast.Constant):
            if type(node.value) not in (int, float):
                kind = _CONSTANT_KINDS.get(type(node.value), type(node.value).__name__)
                raise ToolInputError(f"not allowed: {kind} (only real numbers)")
        elif isinstance(node, ast.Name):
            if node.id not in CONSTANTS:
                raise ToolInputError(f"not allowed: name {node.id!r} "
                                     f"(known constants: {', '.join(CONSTANTS)}; no variables)")
        elif isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            stack += [(node.left, depth + 1), (node.right, depth + 1)]
        elif isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            stack.append((node.operand, depth + 1))
        elif isinstance(node, ast.Call):
            if not (isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS):
                callee = (ast.get_source_segment(source, node.func) or "?")[:60]
                raise ToolInputError(f"not allowed: function call {callee!r} "
                                     f"(allowed functions: {', '.join(FUNCTIONS)})")
            if node.keywords:
                raise ToolInputError("not allowed: keyword arguments; pass numbers positionally")
            stack += [(arg, depth + 1) for arg in node.args]
        else:
            kind = _FORBIDDEN_NAMES.get(type(node), type(node).__name__)
            raise ToolInputError(f"not allowed: {kind} (only numbers, operators and math functions)")


def _checked(value: Any) -> int | float:
    if isinstance(value, complex):
        raise ToolInputError("result is not a real number (e.g. a fractional power of a negative number)")
    if isinstance(value, float) and not math.isfinite(value):
        raise ToolInputError("result is too large for floating point")
    if isinstance(value, int) and abs(value) >= _INT_LIMIT:
        raise ToolInputError(f"result has more than {MAX_INT_DIGITS} digits")
    return value


def _evaluate(node: ast.AST) -> int | float:
    if isinstance(node, ast.Constant):
        return _checked(node.value)
    if isinstance(node, ast.Name):
        return CONSTANTS[node.id]
    if isinstance(node, ast.UnaryOp):
        return _checked(_UNARY[type(node.op)](_evaluate(node.operand)))
    if isinstance(node, ast.BinOp):
        left, right = _evaluate(node.left), _evaluate(node.right)
        return _checked(_BINARY[type(node.op)](left, right))
    assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    name = node.func.id
    args = [_evaluate(arg) for arg in node.args]
    try:
        return _checked(FUNCTIONS[name](*args))
    except ValueError as exc:
        raise ToolInputError(f"{name}: undefined for these arguments ({exc})") from exc
    except TypeError as exc:
        # Our wrappers are named _factorial, _round...; the model only knows the public name.
        raise ToolInputError(f"{name}: wrong arguments ({str(exc).replace('_' + name, name)})") from exc


def evaluate(expression: str) -> tuple[str, int | float]:
    """Normalise and evaluate `expression`; return the text actually evaluated and its value."""
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ToolInputError(f"expression is too long (limit {MAX_EXPRESSION_CHARS} characters)")
    text = normalise(expression)
    if not text:
        raise ToolInputError("empty expression; give one arithmetic expression such as (15+27)*3")
    return text, _presentable(evaluate_python(text))


def _parse(text: str) -> ast.Expression:
    """`ast.parse`, again if it fails spuriously: on CPython 3.11 a parse that races another thread's (ours, or
    LangChain's, which parses function sources) can raise "AST constructor recursion depth mismatch"
    (python/cpython#106905): the counter it checks is shared. Seen in the service's load test, ~1 run in 1,000."""
    for attempt in range(PARSE_ATTEMPTS):
        try:
            return ast.parse(text, mode="eval")
        except SystemError:
            if attempt == PARSE_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


def evaluate_python(text: str) -> int | float:
    """Evaluate text that is already Python syntax (no notation rewritten), under the calculator's whitelist
    and limits; ToolInputError says why not. The offline model checks its expressions with it too."""
    if len(text) > MAX_EXPRESSION_CHARS:
        raise ToolInputError(f"expression is too long (limit {MAX_EXPRESSION_CHARS} characters)")
    _check_nesting(text)
    try:
        tree = _parse(text)
    except SyntaxError as exc:
        raise ToolInputError(f"cannot parse {text[:80]!r}: {exc.msg}") from exc
    except (ValueError, RecursionError, MemoryError) as exc:
        raise ToolInputError("expression is too complex to parse") from exc
    _validate(tree, text)
    try:
        return _evaluate(tree.body)
    except ZeroDivisionError as exc:
        raise ToolInputError("division by zero") from exc
    except OverflowError as exc:
        raise ToolInputError("result is too large for floating point") from exc
    except RecursionError as exc:
        raise ToolInputError("expression is too complex") from exc


def _presentable(value: int | float) -> int | float:
    """Integral floats become ints (8/2 -> 4); binary noise is dropped (0.1+0.2 -> 0.3, not 0.30000000000000004)."""
    if not isinstance(value, float):
        return value
    if value.is_integer() and abs(value) < _EXACT_FLOAT_LIMIT:
        return int(value)
    # If rounding to 15 significant digits leaves at most 12, digits 13-15 were zeros and the tail
    # beyond them is binary rounding noise; otherwise keep every digit (sqrt(2) stays 1.4142135623730951).
    shortened = f"{value:.15g}"
    mantissa = shortened.split("e")[0].replace("-", "").replace(".", "").strip("0")
    return float(shortened) if len(mantissa) <= 12 else value


def calculator(expression: str) -> dict[str, Any]:
    """Evaluate an arithmetic expression; use it for every calculation instead of doing math in your head.

    Supports + - * / // % ** (or ^), parentheses, numbers, the functions sqrt, log (natural; log(x, base)),
    ln, log10, log2, exp, sin, cos, tan, asin, acos, atan (radians), floor, ceil, factorial, abs,
    round, min, max, pow, hypot, degrees, radians, and the constants pi, e, tau. Chinese and English
    notation both work: × ÷ full-width digits and brackets, powers as superscripts (2², 10⁻³), "3 x 4",
    "15%" (percent), "1,000" (thousands separator; inside a function call commas separate arguments),
    and a trailing "=", "?" or "等于多少". Whole-number results are returned as integers. Variables,
    units, words and any other Python are refused.

    Args:
        expression: One arithmetic expression, e.g. "(15+27)*3", "sqrt(2)/2", "1,299×12" or "２＾１０".
            Numbers, operators and the listed functions only: no words, units or variables.
    """
    text, value = evaluate(expression)
    return {"expression": text, "result": value}


def calculator_tool() -> ToolMeta:
    """The `calculator` tool: pure CPU, bounded work, so no retries and a short timeout."""
    return ToolMeta.from_function(calculator, timeout_s=5.0, tags=("math",), max_attempts=1)
