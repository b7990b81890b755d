"""Scoring tool calls as BFCL's AST checker does, for its Python categories (our own, smaller implementation).

A task gives its function docs (BFCL format) and the possible answers: one entry per expected call,
`{function name: {parameter: [allowed values]}}`, where `""` among the allowed values means the parameter may be
left out. The run's calls match when:

- there are exactly as many calls as expected entries, and each entry matches a different call, in any order
  (BFCL's simple and multiple categories expect one call, the parallel ones several; like BFCL, each entry takes
  the first call that matches it);
- a call names the entry's function (dots become underscores, as BFCL does for OpenAI-style tool names);
- every required parameter is there, and no parameter is unknown to the doc or absent from the entry;
- every value has the doc's type (Python types: an int is accepted for a float, a bool is not an int; list items
  are checked one level deep); a value of the allowed values' own type is accepted when that differs from the doc's
  (BFCL's "variable" case) and is then compared as is;
- every value is among the allowed ones: strings compared after standardising (lower case, without spaces and
  `,./-_*^`, single quotes as double), lists element by element the same way, dicts key by key (a missing key
  must allow ""), lists of dicts in order, other values by equality;
- every parameter of the entry that the call leaves out allows "".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

PY_TYPES: dict[str, type] = {"string": str, "integer": int, "float": float, "boolean": bool, "array": list,
                             "tuple": list, "dict": dict, "any": str}
_IGNORED_IN_STRINGS = re.compile(r"[ ,./\-_*^]")

Call = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class CallScore:
    """Whether the calls match, and if not, the first reason (one line)."""

    correct: bool
    reason: str = ""


def tool_name(function_name: str) -> str:
    """The tool name a BFCL function is offered under: providers reject dots in tool names."""
    return function_name.replace(".", "_")


def standardise(text: str) -> str:
    return _IGNORED_IN_STRINGS.sub("", text).lower().replace("'", '"')


def score_calls(functions: list[dict[str, Any]], answers: list[dict[str, Any]], calls: list[Call]) -> CallScore:
    """The run's `calls` (tool name, arguments) against the task's possible `answers`."""
    if len(calls) != len(answers):
        return CallScore(False, f"expected {len(answers)} call(s), got {len(calls)}")
    docs = {tool_name(f["name"]): f for f in functions}
    free = list(range(len(calls)))
    for entry in answers:
        ((name, allowed),) = entry.items()
        doc = docs.get(tool_name(name))
        if doc is None:
            return CallScore(False, f"the possible answer names {name}, which no function doc describes")
        reasons = []
        for index in free:
            reason = match_call(doc, allowed, calls[index])
            if reason is None:
                free.remove(index)
                break
            reasons.append(reason)
        else:
            return CallScore(False, f"no call matches {tool_name(name)}: {reasons[0] if reasons else 'none left'}")
    return CallScore(True)


def match_call(doc: dict[str, Any], allowed: dict[str, list[Any]], call: Call) -> str | None:
    """None when `call` matches the doc and the allowed values; else why not."""
    name, args = call
    if name != tool_name(doc["name"]):
        return f"called {name}"
    parameters = doc.get("parameters") or {}
    specs = parameters.get("properties") or {}
    for param in parameters.get("required") or []:
        if param not in args:
            return f"missing required argument {param!r}"
    for param, value in args.items():
        if param not in specs or param not in allowed:
            return f"unexpected argument {param!r}"
        reason = check_value(param, value, specs[param], allowed[param])
        if reason:
            return reason
    for param, values in allowed.items():
        if param not in args and "" not in values:
            return f"argument {param!r} left out, but it is not optional"
    return None


def _answer_type(allowed: list[Any]) -> type | None:
    return next((type(a) for a in allowed if a != ""), None)


def _item_type_ok(item: Any, item_type: type | None, allowed_list: list[Any]) -> bool:
    return item_type is None or type(item) is item_type or type(item) is _answer_type(allowed_list)


def check_type(param: str, value: Any, spec: dict[str, Any], allowed: list[Any]) -> tuple[str | None, bool]:
    """(why the type is wrong or None, whether the value stands for a variable and is compared as is)."""
    kind = str(spec.get("type"))
    expected = PY_TYPES.get(kind)
    answer_type = _answer_type(allowed)
    variable = answer_type is not None and expected is not None and answer_type is not expected
    if expected is None or type(value) is expected:
        items = PY_TYPES.get(str((spec.get("items") or {}).get("type"))) if kind in ("array", "tuple") else None
        if items is None or any(not isinstance(a, list) or all(_item_type_ok(v, items, a) for v in value)
                                for a in allowed):
            return None, variable
        return f"{param!r}: items of {kind} must be {items.__name__}", variable
    if answer_type is not None and type(value) is answer_type:
        return None, True
    return f"{param!r}: expected {kind}, got {type(value).__name__} ({value!r:.60})", variable


def check_value(param: str, value: Any, spec: dict[str, Any], allowed: list[Any]) -> str | None:
    """None when `value` has the right type and is among the `allowed` values."""
    if spec.get("type") == "float" and type(value) is int:
        value = float(value)  # Python would convert it; BFCL accepts it
    reason, variable = check_type(param, value, spec, allowed)
    if reason:
        return reason
    if not variable:
        item_kind = (spec.get("items") or {}).get("type")
        if isinstance(value, dict):
            return None if _dict_ok(value, allowed) else f"{param!r}: {value!r:.80} is not an allowed dict"
        if isinstance(value, list) and item_kind == "dict":
            return None if _dict_list_ok(value, allowed) else f"{param!r}: {value!r:.80} is not an allowed list"
        if isinstance(value, str):
            ok = standardise(value) in [standardise(a) for a in allowed if isinstance(a, str)]
            return None if ok else f"{param!r}: {value!r:.60} is not one of {allowed!r:.100}"
        if isinstance(value, list):
            ok = _standard_list(value) in [_standard_list(a) if isinstance(a, list) else [] for a in allowed]
            return None if ok else f"{param!r}: {value!r:.60} is not one of {allowed!r:.100}"
    return None if value in allowed else f"{param!r}: {value!r:.60} is not one of {allowed!r:.100}"


def _standard_list(values: list[Any]) -> list[Any]:
    return [standardise(v) if isinstance(v, str) else v for v in values]


def _standard(value: Any) -> Any:
    return standardise(value) if isinstance(value, str) else value


def _dict_ok(value: dict[str, Any], alloweds: list[Any]) -> bool:
    """Some allowed dict has every key of `value` with an allowed value, and allows leaving out the others."""
    for allowed in alloweds:
        if not isinstance(allowed, dict):
            continue
        keys_ok = all(k in allowed and _standard(v) in [_standard(a) for a in allowed[k]] for k, v in value.items())
        if keys_ok and all(k in value or "" in values for k, values in allowed.items()):
            return True
    return False


def _dict_list_ok(value: list[Any], alloweds: list[Any]) -> bool:
    """Some allowed list of dicts has as many dicts, each matching `value`'s at the same place."""
    return any(isinstance(allowed, list) and len(allowed) == len(value)
               and all(isinstance(v, dict) and _dict_ok(v, [a]) for v, a in zip(value, allowed, strict=True))
               for allowed in alloweds)
