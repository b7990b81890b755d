"""One tool round stays readable: the product modules a ReAct question with one tool call executes, from the
model's reply through the gateway to the observation and the answer, are counted and held to a ceiling. A call
that crossed 57 modules is what this test exists to prevent (docs/architecture.md walks the same path)."""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path

from langchain_core.messages import AIMessage

from reactgraph.graph import build_react_graph
from support.forked_commands import forked_run
from support.scripted import ScriptedChatModel, call, notes_gateway, tool_reply

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = tuple(str(ROOT / folder) + "/" for folder in ("graph", "nodes", "models", "tools", "memory", "reactgraph"))
MAX_MODULES = 30


def graph_for_one_tool_round():
    model = ScriptedChatModel.of(tool_reply("look it up", call("lookup", topic="x")), *[AIMessage("done")] * 3)
    return build_react_graph(notes_gateway(), model=model)


def test_one_tool_round_executes_at_most_30_product_modules(tmp_path):
    # Counted in a process of its own: what earlier tests of this worker left switched on (a tracing hook, a log
    # filter) would otherwise be counted as the round's.
    env = {**os.environ, "REACTGRAPH_HOME": str(tmp_path)}
    done = forked_run([], env, timeout=120, entry="test_tool_round_modules:count_main")
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert any(module.startswith("tools/gateway") for module in seen)  # the profile did see the tool round
    assert len(seen) <= MAX_MODULES, seen


def count_main(argv: list[str]) -> int:
    """The product modules one tool round executes, as a JSON list on stdout (run by the test, forked)."""
    print(json.dumps(modules_of_one_round()))
    return 0


def modules_of_one_round() -> list[str]:
    graph_for_one_tool_round().invoke({"messages": [("user", "q")]})  # imports and first-use caches out of the way
    graph = graph_for_one_tool_round()  # building is not the round: only the question's run is counted
    seen: set[str] = set()

    def profile(frame, event, _arg):
        if event == "call" and frame.f_code.co_filename.startswith(PRODUCT):
            seen.add(str(Path(frame.f_code.co_filename).relative_to(ROOT)))

    # the gateway runs a sync tool on a thread of its own (its pipeline runs on the caller's)
    previous = sys.getprofile(), threading.getprofile()
    sys.setprofile(profile)
    threading.setprofile(profile)
    try:
        result = graph.invoke({"messages": [("user", "q")]})
    finally:
        sys.setprofile(previous[0])
        threading.setprofile(previous[1])
    assert result["status"] == "answered"
    return sorted(seen)
