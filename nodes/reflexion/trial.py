"""`trial`: one attempt at the question by the ReAct graph (the actor), with the lessons so far in its prompt."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime

from reactgraph.models.gateway import add_usage
from reactgraph.nodes.budget import exhausted, remaining_context, wrap_up_note
from reactgraph.nodes.context import Context
from reactgraph.nodes.conversation import last_human_index
from reactgraph.nodes.driver import Call, Node, Steps, dual_node
from reactgraph.nodes.reflexion.state import ReflexionState, answer_id, trial_of
from reactgraph.nodes.state import (
    budget_stopped,
    final_answer_of,
    iteration_of,
    lessons_of,
    messages_of,
    status_of,
    steps_of,
    stop_reason_of,
    turn_id_of,
    usage_of,
)
from reactgraph.nodes.text_protocol import corrections_left


def _actor_input(state: ReflexionState) -> dict[str, Any]:
    # The conversation without an earlier trial's answer: each trial starts from the question, not a transcript.
    previous = answer_id(turn_id_of(state))
    return {"messages": [m for m in state["messages"] if m.id != previous], "lessons": lessons_of(state)}


def _absorb(state: ReflexionState, result: dict[str, Any], context: Context) -> dict[str, Any]:
    """The trial's outcome in the run's terms: iterations and records add up; the answer replaces the last one."""
    offset = iteration_of(state)
    messages = messages_of(result)
    spent = _spent(state, result, context)
    answer = _in_run_terms(final_answer_of(result), result.get("budget"), spent.get("budget"))
    return {"trial": trial_of(state) + 1, "iteration": offset + iteration_of(result),
            "steps": [{**step, "step": step["step"] + offset} for step in steps_of(result)],
            "final_answer": answer, "status": status_of(result), "reflection": result.get("reflection"),
            "coverage": result.get("coverage"),
            "trajectory": messages[max(last_human_index(messages), 0):],
            "messages": [AIMessage(answer, id=answer_id(turn_id_of(state)))], **spent}


def _in_run_terms(answer: str, trial_budget: Any, run_budget: Any) -> str:
    """The trial's wrap-up line names what was left to it; the run's answer names the run's budget."""
    if not trial_budget or not run_budget or trial_budget == run_budget:
        return answer
    for lang_zh in (False, True):  # the note is in the question's language
        answer = answer.replace(wrap_up_note(trial_budget, lang_zh), wrap_up_note(run_budget, lang_zh))
    return answer


def _spent(state: ReflexionState, result: dict[str, Any], context: Context) -> dict[str, Any]:
    """The trial's usage, added to the run's; a budget the trial ran out of is reported against the run's limit."""
    usage = usage_of(result)
    if stop_reason_of(result) == "format":  # the run's format-error budget is spent: no further trial
        return {"usage": usage, "stop_reason": "format"}
    if not budget_stopped(result):
        return {"usage": usage}
    spent = exhausted(add_usage(usage_of(state), usage), context)
    return {"usage": usage, "stop_reason": "budget", "budget": spent or result.get("budget")}


def make_trial(actor: CompiledStateGraph[Any, Any, Any, Any]) -> Node:
    """The trial node: runs `actor` as a subgraph, inheriting checkpointer, store and thread."""

    def trial(state: ReflexionState, runtime: Runtime[Context], config: RunnableConfig) -> Steps:
        # The trial may spend what the earlier trials (and their evaluations) left of each budget.
        budgets = remaining_context(usage_of(state), runtime.context)
        # The format-error budget is the run's too, as in the other graphs: what earlier trials left of it.
        budgets = replace(budgets, max_format_errors=corrections_left(state, budgets.max_format_errors))
        result = yield from Call(actor, _actor_input(state), config, {"context": budgets})
        return _absorb(state, result, runtime.context)

    return dual_node(trial, name="trial")
