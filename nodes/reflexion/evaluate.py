"""`evaluate`: judge the last trial — by the task's checker or expected text when given, else by the model."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from reactgraph.models.gateway import ModelCall, ModelReply
from reactgraph.nodes import prompts
from reactgraph.nodes.context import Context
from reactgraph.nodes.conversation import tokens_of
from reactgraph.nodes.driver import AgentServices, Node, Steps, dual_node, log_fallback
from reactgraph.nodes.prompts import for_model
from reactgraph.nodes.reflexion.budget_stop import stopped_by_budget
from reactgraph.nodes.reflexion.state import (
    Evaluation,
    EvaluationRecord,
    ReflexionState,
    criteria_of,
    trajectory_of,
    trial_of,
)
from reactgraph.nodes.state import (
    ExecutionStep,
    final_answer_of,
    has_failed,
    iteration_of,
    make_step,
    status_of,
    steps_of,
)

# A checker takes the answer, the run's ExecutionStep records and the task's params (the same shape as
# evals.checks, so a harness can register its own): True/False, or (passed, reason).
Checker = Callable[..., bool | tuple[bool, str]]
CHECKERS: dict[str, Checker] = {}


def register_checker(name: str, checker: Checker | None = None) -> Any:
    """Register a checker a Reflexion input can name (`{"checker": name}`); usable as a decorator."""
    def register(fn: Checker) -> Checker:
        CHECKERS[name] = fn
        return fn
    return register(checker) if checker is not None else register


@register_checker("answered")
def answered(answer: str, steps: Sequence[ExecutionStep], **_: Any) -> tuple[bool, str]:
    """The last attempt ended with status answered (not at the limit, not failed)."""
    final = next((s for s in reversed(steps) if s["node"] == "finalize"), None)
    status = final["status"] if final else "none"
    return bool(answer.strip()) and status == "answered", f"the attempt ended with status {status}"


def normalise(text: str) -> str:
    """Casefolded, thousands separators inside numbers removed ("127,750" → "127750")."""
    return re.sub(r"(?<=\d)[,，](?=\d{3}\b)", "", text or "").casefold()


def by_criteria(state: ReflexionState) -> EvaluationRecord | None:
    """The verdict of the task's own check, or None when the question came without one."""
    criteria = criteria_of(state)
    answer = final_answer_of(state)
    if name := criteria.get("checker"):
        verdict = CHECKERS[name](answer, steps_of(state), **(criteria.get("params") or {}))
        passed, reason = verdict if isinstance(verdict, tuple) else (bool(verdict), "")
        return {"passed": bool(passed), "reason": reason or f"checker {name} {'passed' if passed else 'failed'}",
                "by": "checker"}
    if expected := criteria.get("expected"):
        wanted = [expected] if isinstance(expected, str) else list(expected)
        missing = [text for text in wanted if normalise(text) not in normalise(answer)]
        reason = (f"the answer does not contain {', '.join(repr(m) for m in missing)}" if missing
                  else "the answer contains the expected text")
        return {"passed": not missing, "reason": reason, "by": "expected"}
    return None


def by_rules(state: ReflexionState, why: str = "") -> EvaluationRecord:
    """No model judgement to be had: an attempt that answered (not at the limit, not failed) passes."""
    status = status_of(state) or "none"
    reason = f"the attempt ended with status {status}" + (f" ({why})" if why else "")
    return {"passed": status == "answered", "reason": reason, "by": "rules"}


def _settle(state: ReflexionState, verdict: EvaluationRecord, tokens: int, started: float) -> dict[str, Any]:
    record = make_step(step=iteration_of(state), node="evaluate", status="passed" if verdict["passed"] else
                       "failed", thought=f"trial {trial_of(state)} · judged by {verdict['by']}",
                       observation=verdict["reason"], tokens=tokens, latency_ms=(time.perf_counter() - started) * 1000)
    return {"evaluation": verdict, "steps": [record]}


def _from_output(state: ReflexionState, output: ModelReply, started: float) -> dict[str, Any]:
    parsed = output.parsed
    if isinstance(parsed, Evaluation):
        verdict = EvaluationRecord(passed=parsed.passed, reason=parsed.reason, by="model")
    else:
        verdict = by_rules(state, f"model judgement unusable: {str(output.parsing_error or '')[:120]}")
    return _settle(state, verdict, tokens_of(output.message), started)


def without_model(state: ReflexionState, context: Context) -> EvaluationRecord | None:
    """The verdict when no model judgement is needed or to be had, else None."""
    if has_failed(state):
        reason = f"the attempt failed: {final_answer_of(state)[:200]}"
        return {"passed": False, "reason": reason, "by": "status"}
    if (verdict := by_criteria(state)) is not None:
        return verdict
    if context.protocol == "text":  # a text-only model may offer no structured output
        return by_rules(state)
    return None


def make_evaluate(services: AgentServices) -> Node:
    """The evaluate node: the task's own check when it has one, else the model's judgement, else the rules."""

    def evaluate(state: ReflexionState, runtime: Runtime[Context], config: RunnableConfig) -> Steps:
        started = time.perf_counter()
        if (verdict := without_model(state, runtime.context)) is not None:
            return _settle(state, verdict, 0, started)
        request = [SystemMessage(prompts.EVALUATE_PROMPT), *for_model(trajectory_of(state))]
        try:
            output = yield from ModelCall("evaluate", request, schema=Evaluation)
        except Exception as exc:  # noqa: BLE001 - judging is advisory; the rules decide without it
            log_fallback("evaluate", "judgement_rules", exc)
            return _settle(state, by_rules(state, f"model judgement failed: {type(exc).__name__}"), 0, started)
        update = _from_output(state, output, started)
        if update["evaluation"]["passed"]:  # a passed answer keeps its status, whatever the judging cost
            return update
        return stopped_by_budget(state, runtime, update, output)

    return dual_node(evaluate, name="evaluate", models=services.models)
