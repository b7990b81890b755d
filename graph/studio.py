"""The graphs `langgraph.json` exports to LangGraph Studio and `langgraph dev`: one compiled graph per paradigm.

They are compiled without a checkpointer: the dev server refuses a graph with one of its own, and passes in the
one langgraph.json names (react-graph's Redis saver, `reactgraph.studio.persistence`). They use the default
gateway and `Context.model` (the scripted offline model unless a run's context or $REACTGRAPH_MODEL says
otherwise). `reactgraph studio` (`reactgraph.studio.launcher`) serves them.
"""

from __future__ import annotations

from reactgraph.graph.plan_solve import build_plan_solve_graph
from reactgraph.graph.react import build_react_graph
from reactgraph.graph.reflexion import build_reflexion_graph

react = build_react_graph(name="react")
plan_solve = build_plan_solve_graph(name="plan_solve")
reflexion = build_reflexion_graph(name="reflexion")
