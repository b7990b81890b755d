"""`--model test`: any tool seen working end to end without an API key — a user's tool and an MCP server's — with
arguments built from the tool's JSON schema alone."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Literal

from langchain_core.messages import HumanMessage, ToolMessage
from pydantic import Field

from reactgraph.graph import build_react_graph
from reactgraph.models.loader import load_chat_model

TOY_SERVER = Path(__file__).parent / "mcp_servers" / "toy_server.py"


def paint(colour: Literal["teal", "red"], size: Annotated[int, Field(ge=5)], coats: int = 2,
          note: str | None = None) -> str:
    """Paint a wall.

    Args:
        colour: Which paint.
        size: Square metres.
        coats: How many coats.
        note: Anything to add.
    """
    return f"{size} m² in {colour}, {coats} coats"


def test_the_named_tool_is_called_with_arguments_built_from_its_schema_then_answered_from_its_result():
    graph = build_react_graph(tools=[paint], model=load_chat_model("test"))
    result = graph.invoke({"messages": [HumanMessage("paint the wall")]}, {"configurable": {"thread_id": "t"}},
                          context={"reflection": "off"})
    (message,) = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    # enum → its first value, a minimum → that minimum, defaults and optional fields left to the tool
    assert message.status == "success" and message.text == "5 m² in teal, 2 coats"
    assert "paint:" in result["final_answer"] and "5 m² in teal, 2 coats" in result["final_answer"]


def test_an_mcp_servers_tool_runs_end_to_end_from_the_cli_with_no_key(cli, tmp_path):
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"toy": {"type": "stdio", "command": sys.executable,
                                                         "args": [str(TOY_SERVER), "stdio"], "approval": "never"}}}))
    code, out, err = cli("ask", "use the toy server", "--model", "test:add", "--mcp", str(config), "--json",
                         "--store", "memory")
    assert code in (0, 1), err
    result = json.loads(out)
    (act,) = [step for step in result["steps"] if step["node"] == "act"]
    assert (act["action"], act["status"]) == ("add", "ok") and "add: " in result["answer"]


def test_an_unknown_spec_names_the_test_model():
    from reactgraph.models.loader import ModelConfigError, parse_spec

    try:
        parse_spec("tset")
    except ModelConfigError as exc:
        assert "'test'" in str(exc)
    else:
        raise AssertionError("tset was accepted")


def test_a_hostile_schema_is_built_within_bounds():
    from reactgraph.models.schema_test_model import example_value

    value = example_value({"type": "object", "required": ["a", "s", "deep"], "properties": {
        "a": {"type": "array", "minItems": 10**9, "items": {"type": "string", "minLength": 10**9}},
        "s": {"type": "string", "minLength": "many"},
        "deep": {"$ref": "#", "type": "object", "required": ["x"], "properties": {"x": {"type": "object"}}}}})
    assert len(value["a"]) == 10 and all(len(item) == 100 for item in value["a"]) and value["s"] == "a"
    malformed = [{"enum": {"a": 1}}, {"anyOf": "x"}, {"type": "object", "properties": [1], "required": "p"},
                 {"type": "integer", "minimum": "ten"}, {"type": "number", "minimum": 1e300}, {"oneOf": [1, 2]}]
    assert [example_value(schema) for schema in malformed] == ["a", "a", {}, 0, 0.0, None]
