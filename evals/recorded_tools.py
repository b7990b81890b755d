"""Schema-only tools for a task: the model sees each function's doc and may call it; the gateway validates and
records the call, and nothing runs. Every call returns the same fixed "recorded" observation.

Function docs come as BFCL writes them (`{"name", "description", "parameters"}` with types such as "dict",
"float", "tuple", "any"); `json_schema()` turns them into valid JSON schema (an already-valid schema passes
unchanged), so the gateway enforces the same types the model was shown. Names with dots are offered with
underscores (providers reject dots; `bfcl_score.tool_name`).
"""

from __future__ import annotations

import json
from typing import Any

from reactgraph.evals.bfcl_score import tool_name
from reactgraph.tools import ToolGateway, ToolMeta

RECORDED = json.dumps({"status": "recorded", "note": "schema-only tool: the call was recorded, not executed; "
                                                     "there is no other result"})
# BFCL's type names → JSON schema's; "any" has no JSON schema type (no "type" key accepts every value).
_TYPES = {"dict": "object", "float": "number", "tuple": "array", "any": None}
_KEPT = ("description", "enum", "default")  # other keys (BFCL's "optional", "format", "maximum") are not enforced


def json_schema(spec: dict[str, Any]) -> dict[str, Any]:
    """A JSON schema for one BFCL parameter spec (recursively: properties of dicts, items of arrays)."""
    schema: dict[str, Any] = {k: spec[k] for k in _KEPT if k in spec}
    kind = spec.get("type")
    kind = _TYPES.get(kind, kind) if isinstance(kind, str) else None
    if kind:
        schema["type"] = kind
    if isinstance(spec.get("properties"), dict):
        schema["properties"] = {name: json_schema(sub) if isinstance(sub, dict) else {}
                                for name, sub in spec["properties"].items()}
        required = spec.get("required")
        if isinstance(required, list) and all(isinstance(r, str) for r in required):
            schema["required"] = list(dict.fromkeys(required))
    if isinstance(spec.get("items"), dict):
        schema["items"] = json_schema(spec["items"])
    return schema


async def _record(**arguments: Any) -> str:
    return RECORDED


def recorded_tool(doc: dict[str, Any]) -> ToolMeta:
    """One function doc as a schema-only tool (ToolRegistrationError, one line, for a doc that cannot be one)."""
    parameters = json_schema(doc.get("parameters") or {"type": "dict", "properties": {}})
    parameters["type"] = "object"
    # Local and instant: no retry, and a failure would only mean the gateway itself is broken.
    return ToolMeta.from_json_schema(tool_name(str(doc.get("name", ""))), str(doc.get("description") or ""),
                                     parameters, _record, max_attempts=1, tags=("recorded",))


def recorded_gateway(docs: list[dict[str, Any]] | tuple[dict[str, Any], ...]) -> ToolGateway:
    """A gateway offering exactly these functions, as schema-only tools."""
    return ToolGateway([recorded_tool(doc) for doc in docs])


def recorded_calls(steps: list[dict[str, Any]]) -> tuple[list[tuple[str, dict[str, Any]]], int]:
    """The calls the gateway accepted and recorded, in order, an exact repeat counted once (the loop asking
    again after "recorded" is not a new request), and how many calls it refused (unknown tool, bad arguments)."""
    calls: list[tuple[str, dict[str, Any]]] = []
    seen: set[str] = set()
    refused = 0
    for step in steps:
        if not step.get("action") or step.get("node") == "approve":
            continue
        if step.get("status") != "ok":
            refused += 1
            continue
        args = step.get("action_input") if isinstance(step.get("action_input"), dict) else {}
        key = json.dumps([step["action"], args], sort_keys=True, default=str)
        if key not in seen:
            seen.add(key)
            calls.append((str(step["action"]), dict(args or {})))
    return calls, refused
