"""Which items a search filter keeps and which namespaces a match condition selects.

The same semantics as LangGraph's InMemoryStore (and, for top-level fields, its Postgres store): a plain
value means equality (nested mappings and lists compare element by element), `{"$op": v}` applies
$eq/$ne/$gt/$gte/$lt/$lte. One deliberate difference: an ordering operator on values that cannot be
compared (a missing field, text against a number) does not match, where InMemoryStore raises.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any

from langgraph.store.base import MatchCondition

_ORDER: dict[str, Callable[[Any, Any], bool]] = {
    "$gt": operator.gt, "$gte": operator.ge, "$lt": operator.lt, "$lte": operator.le}


def matches(value: Mapping[str, Any], filter: Mapping[str, Any] | None) -> bool:
    """Whether an item's value passes every condition of a search filter."""
    return not filter or all(_compare(value.get(field), wanted) for field, wanted in filter.items())


def _compare(actual: Any, wanted: Any) -> bool:
    if isinstance(wanted, Mapping):
        if any(str(k).startswith("$") for k in wanted):
            return all(_apply(actual, op, operand) for op, operand in wanted.items())
        return isinstance(actual, Mapping) and all(_compare(actual.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, (list, tuple)):
        return (isinstance(actual, (list, tuple)) and len(actual) == len(wanted)
                and all(_compare(a, w) for a, w in zip(actual, wanted, strict=True)))
    return actual == wanted


def _apply(actual: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return actual == operand
    if op == "$ne":
        return actual != operand
    compare = _ORDER.get(op)
    if compare is None:
        raise ValueError(f"Unsupported operator: {op} (supported: $eq, $ne, $gt, $gte, $lt, $lte)")
    try:
        return compare(float(actual), float(operand))  # numbers, and numeric text, like InMemoryStore
    except (TypeError, ValueError):
        pass
    if isinstance(actual, str) and isinstance(operand, str):
        return compare(actual, operand)
    return False


def namespace_matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    """A prefix or suffix condition ("*" matches any one label), as InMemoryStore applies it."""
    path = condition.path
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        pairs = zip(namespace, path, strict=False)
    elif condition.match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    else:
        raise ValueError(f"Unsupported match type: {condition.match_type}")
    return all(p == "*" or n == p for n, p in pairs)


def fixed_prefix(conditions: tuple[MatchCondition, ...] | None) -> tuple[str, ...]:
    """The leading labels every listed namespace must have (narrows the index range to read)."""
    best: tuple[str, ...] = ()
    for condition in conditions or ():
        if condition.match_type == "prefix":
            labels = []
            for label in condition.path:
                if label == "*":
                    break
                labels.append(label)
            if len(labels) > len(best):
                best = tuple(labels)
    return best
