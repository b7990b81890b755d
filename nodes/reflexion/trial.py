"""`trial`: one attempt at the question by the ReAct graph (the actor), with the lessons so far in its prompt."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime

from reactgraph.nodes.conversation.transcript import last_human_index
from reactgraph.nodes.reflexion.state import ReflexionState, answer_id
from reactgraph.nodes.runtime.budget import add_usage, exhausted, remaining_context, wrap_up_note
from reactgraph.nodes.runtime.node_driver import Call, Node, Steps, dual_node
from reactgraph.nodes.state.context import Context


def _actor_input(state: ReflexionState) -> dict[str, Any]:
    # The conversation without an earlier trial's answer: each trial starts from the question, not a transcript.
    previous = answer_id(state.get("turn_id"))
    return {"messages": [m for m in state["messages"] if m.id != previous], "lessons": list(state.get("lessons") or [])}


def _absorb(state: ReflexionState, result: dict[str, Any], context: Context) -> dict[str, Any]:
    """The trial's outcome in the run's terms: iterations and records add up; the answer replaces the last one."""
    offset = state.get("iteration", 0)
    messages = result.get("messages") or []
    spent = _spent(state, result, context)
    answer = _in_run_terms(result.get("final_answer") or "", result.get("budget"), spent.get("budget"))
    return {"trial": state.get("trial", 0) + 1, "iteration": offset + result.get("iteration", 0),
            "steps": [{**step, "step": step["step"] + offset} for step in result.get("steps", [])],
            "final_answer": answer, "status": result.get("status"), "reflection": result.get("reflection"),
            "coverage": result.get("coverage"),
            "trajectory": messages[max(last_human_index(messages), 0):],
            "messages": [AIMessage(answer, id=answer_id(state.get("turn_id")))], **spent}


def _in_run_terms(answer: str, trial_budget: Any, run_budget: Any) -> str:
    """The trial's wrap-up line names what was left to it; the run's answer names the run's budget."""
    if not trial_budget or not run_budget or trial_budget == run_budget:
        return answer
    for lang_zh in (False, True):  # the note is in the question's language
        answer = answer.replace(wrap_up_note(trial_budget, lang_zh), wrap_up_note(run_budget, lang_zh))
    return answer


def _spent(state: ReflexionState, result: dict[str, Any], context: Context) -> dict[str, Any]:
    """The trial's usage, added to the run's; a budget the trial ran out of is reported against the run's limit."""
    usage = result.get("usage") or {}
    if result.get("stop_reason") != "budget":
        return {"usage": usage}
    spent = exhausted(add_usage(state.get("usage"), usage), context)
    return {"usage": usage, "stop_reason": "budget", "budget": spent or result.get("budget")}


def make_trial(actor: CompiledStateGraph[Any, Any, Any, Any]) -> Node:
    """The trial node: runs `actor` as a subgraph, inheriting checkpointer, store and thread."""

    def trial(state: ReflexionState, runtime: Runtime[Context], config: RunnableConfig) -> Steps:
        # The trial may spend what the earlier trials (and their evaluations) left of each budget.
        budgets = remaining_context(state.get("usage"), runtime.context)
        result = yield from Call(actor, _actor_input(state), config, {"context": budgets})
        return _absorb(state, result, runtime.context)

    return dual_node(trial, name="trial")
