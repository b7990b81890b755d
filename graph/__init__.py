"""Public API: compiled graphs and their runtime configuration."""

from graph.react import build_react_graph
from nodes.context import Context
from nodes.models.loader import ModelConfigError, load_chat_model
from nodes.state import AgentState, ExecutionStep

__all__ = ["AgentState", "Context", "ExecutionStep", "ModelConfigError", "build_react_graph", "load_chat_model"]
