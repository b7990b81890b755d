"""`respond`: a run's structured response, when its graph was built with `response_format=` (LangChain
`create_agent`'s `structured_response`).

It runs after the closing node settled the text answer: the model restates that answer in the schema (the
provider's native structured output or a tool call, models/response_format.py), and the reply is validated. A
reply that does not fit is sent back with what was wrong, at most ATTEMPTS times in all. The result goes to
`structured_response`: the pydantic or dataclass instance, or a dict for a TypedDict or a JSON schema.

When none fits, `structured_response` is None and the turn ends `no_answer` (as a text-protocol reply without
`Final Answer:` does: no answer in the form asked for), the text answer kept with a line saying why. A turn
that already ended worse (failed, budget_exhausted, limit_reached, no_answer) keeps its status; a failed or
budget_exhausted one, or one without an answer, is not asked at all: its model failed or its budget is spent.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from reactgraph.models import response_format as formats
from reactgraph.models.gateway import ModelCall, ModelReply, describe, failure_line
from reactgraph.models.response_format import ResponseFormat
from reactgraph.nodes.context import Context
from reactgraph.nodes.conversation import question_text
from reactgraph.nodes.driver import AgentServices, Node, Steps, dual_node, log_fallback
from reactgraph.nodes.state import final_answer_of, iteration_of, make_step, messages_of, status_of

ATTEMPTS = 3  # the first request and two more, each told what was wrong with the reply before
NOT_ASKED = frozenset({"failed", "budget_exhausted"})
KEPT = frozenset({"limit_reached", "no_answer"})  # already worse than a missing structured response
MAX_SHOWN = 2_000  # characters of the structured response in its step record


def make_respond(services: AgentServices, response_format: ResponseFormat) -> Node:
    """The respond node for `response_format`."""

    def respond(state: Mapping[str, Any], runtime: Runtime[Context], config: RunnableConfig) -> Steps:
        started = time.perf_counter()
        answer = final_answer_of(state)
        if status_of(state) in NOT_ASKED or not answer:
            return {"structured_response": None}
        asked: list[BaseMessage] = formats.request(question_text(messages_of(state)), answer)
        problem = ""
        for _ in range(ATTEMPTS):
            try:
                output = yield from ModelCall("respond", asked, schema=response_format)
            except Exception as exc:  # noqa: BLE001 - after the retries (and fallbacks): the text answer stays
                problem = failure_line(exc, runtime, name_model=False)
                break
            try:
                value = _validated(output, response_format)
            except ValueError as exc:
                problem = str(exc)
                asked = [*asked[:2], formats.retry_note(problem)]
                continue
            return _responded(state, value, response_format, started)
        log_fallback("respond", "no_structured_response", problem)
        return _unanswered(state, problem, started)

    return dual_node(respond, name="respond", models=services.models)


def _validated(output: ModelReply, response_format: ResponseFormat) -> Any:
    """The structured response in a reply; ValueError with why it is not."""
    if (error := output.parsing_error) is not None:
        raise ValueError(f"{response_format.name}: the reply could not be read ({describe(error)})")
    if output.parsed is None:
        raise ValueError(f"{response_format.name}: the reply held no structured answer")
    return response_format.validate(output.parsed)


def _responded(state: Mapping[str, Any], value: Any, response_format: ResponseFormat,
               started: float) -> dict[str, Any]:
    shown = json.dumps(formats.jsonable(value), ensure_ascii=False)
    record = make_step(step=iteration_of(state), node="respond", status="structured_response",
                       thought=f"{response_format.name} ({response_format.strategy} strategy)",
                       observation=shown[:MAX_SHOWN], latency_ms=(time.perf_counter() - started) * 1000)
    # JSON data: the graph's `structured_response` channel gives the run the instance (graph/structured.py)
    return {"structured_response": formats.jsonable(value), "steps": [record]}


def _unanswered(state: Mapping[str, Any], problem: str, started: float) -> dict[str, Any]:
    """No structured response: None, status no_answer unless already worse, the answer saying why."""
    status = status_of(state)
    status = status if status in KEPT else "no_answer"
    note = f"(No structured response: {problem})"
    answer = f"{final_answer_of(state)}\n\n{note}"
    record = make_step(step=iteration_of(state), node="respond", status=status, thought=problem,
                       observation=answer, latency_ms=(time.perf_counter() - started) * 1000)
    update: dict[str, Any] = {"structured_response": None, "status": status, "final_answer": answer,
                              "steps": [record]}
    last = next((m for m in reversed(messages_of(state)) if isinstance(m, AIMessage)), None)
    if last is not None and last.id is not None and last.text.strip() == final_answer_of(state).strip():
        # the answer's message says it too
        update["messages"] = [last.model_copy(update={"content": answer})]
    return update
