"""Public API: compiled graphs and their runtime configuration."""

from graph.plan_solve import build_plan_solve_graph
from graph.react import build_react_graph
from graph.reflexion import build_reflexion_graph
from nodes.context import Context
from nodes.evaluate import register_checker
from nodes.models.loader import ModelConfigError, load_chat_model
from nodes.state import AgentState, ExecutionStep

__all__ = ["AgentState", "Context", "ExecutionStep", "ModelConfigError", "build_plan_solve_graph",
           "build_react_graph", "build_reflexion_graph", "load_chat_model", "register_checker"]
