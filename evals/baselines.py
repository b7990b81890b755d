"""LangChain's `create_agent` as a graph the evals compare: the baseline every LangGraph user would pick first.

It gets what our graphs get: the same model under the same request bounds (replies of at most
`Context.max_output_tokens`, the client's request timeout and retries, as loaded from the same spec), the same
re-runs of a failed model call (`ModelRetryMiddleware` set from our nodes' `model_retry_policy`: as many attempts,
the same pauses, only transient errors, a timeout at temperature 0 once more at most), and a call that still
fails ends the run `failed` with the one line our graphs end with (models/loader.describe_model_error), which
the evals classify alike (evals/outcomes.py); the run's gateway tools through `as_langchain_tools()` (the same
pipeline, faults and circuit breakers), the same system prompt, and the same limits: `max_iterations` tool
rounds plus the answering call, as `ModelCallLimitMiddleware(run_limit=max_iterations + 1, exit_behavior="end")`
(our `react` makes at most that many calls: max_iterations rounds, then an answer without tools; create_agent's
last call may still call tools, which run, and the run then ends with the middleware's "limit exceeded" message,
status limit_reached, where react answers from what it gathered), and
`max_tool_calls` as `ToolCallLimitMiddleware(exit_behavior="continue")` (calls past it are not run and the model
answers, as ours wrap up). It has no token or cost budget, no reflection, no coverage account and one status
for any answer: its result is mapped to what the evals read (answer, status, step records, iterations); model
calls and tokens are counted by the runner's callbacks, as for every graph. It always calls tools natively
(`Context.protocol` does not apply).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRetryMiddleware
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.errors import GraphBubbleUp

from reactgraph.errors import ReactGraphError
from reactgraph.evals.spend import RunStopped
from reactgraph.graph import Context, is_transient_model_error, model_retry_policy
from reactgraph.models.loader import describe_model_error, node_retries_for
from reactgraph.tools import ToolSession
from reactgraph.tools.call import ToolResult


class ModelCallFailed(ReactGraphError):
    """A model call of the baseline that failed for good (after its re-runs): `error`, after `attempts`."""

    def __init__(self, error: Exception, attempts: int) -> None:
        super().__init__(str(error))
        self.error, self.attempts = error, attempts


class Attempts:
    """`retry_on` of the baseline's ModelRetryMiddleware: our nodes' choice (a transient error, and a timeout at
    temperature 0 or an empty stream once more at most), counting the attempts of the current call."""

    def __init__(self, temperature: float) -> None:
        self.temperature = temperature
        self.failures: Counter[str] = Counter()

    def __call__(self, exc: Exception) -> bool:
        kind = type(exc).__name__
        self.failures[kind] += 1
        limit = node_retries_for(exc, self.temperature)
        return is_transient_model_error(exc) and (limit is None or self.failures[kind] <= limit)

    @property
    def made(self) -> int:
        return max(1, sum(self.failures.values()))


class SameFailures(AgentMiddleware):
    """Outermost around each model call: a call that failed for good becomes `ModelCallFailed` (the run ends
    `failed`, as ours do); the eval's own stops and LangGraph's interrupts pass through."""

    def __init__(self, attempts: Attempts) -> None:
        super().__init__()
        self.attempts = attempts

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        self.attempts.failures.clear()
        try:
            return handler(request)
        except (GraphBubbleUp, RunStopped):
            raise
        except Exception as exc:  # every model failure ends the run as our graphs' end
            raise ModelCallFailed(exc, self.attempts.made) from exc


def same_retries(model: Any) -> list[AgentMiddleware]:
    """The middleware that gives the baseline our nodes' re-runs of a failed model call and their failure."""
    policy = model_retry_policy()
    attempts = Attempts(float(getattr(model, "temperature", 0.0) or 0.0))
    return [SameFailures(attempts),
            ModelRetryMiddleware(max_retries=policy.max_attempts - 1, retry_on=attempts, on_failure="error",
                                 initial_delay=policy.initial_interval, backoff_factor=policy.backoff_factor,
                                 max_delay=policy.max_interval, jitter=policy.jitter)]


def bounded(model: Any, context: Context) -> Any:
    """The model with replies of at most `context.max_output_tokens`, as our model gateway bounds them."""
    if "max_tokens" not in getattr(type(model), "model_fields", {}):
        return model  # a scripted model without the setting
    return model.model_copy(update={"max_tokens": context.max_output_tokens})


class CreateAgentBaseline:
    """Runs `langchain.agents.create_agent` per question and answers as our graphs' final state does."""

    def __init__(self, gateway: Any, model: Any, checkpointer: Any = None) -> None:
        self.gateway, self.model, self.checkpointer = gateway, model, checkpointer

    def _agent(self, context: Context, on_result: Any) -> tuple[Any, set[str]]:
        from langchain.agents import create_agent
        from langchain.agents.middleware import ModelCallLimitMiddleware, ToolCallLimitMiddleware

        names = [meta.name for meta in self.gateway.tools()]
        # Every call runs unasked: the runner approves each call our graphs pause for (evals/runner.py).
        session = ToolSession.of(id="create_agent", approval=dict.fromkeys(names, "never"))
        middleware: list[Any] = [*same_retries(self.model),
                                 ModelCallLimitMiddleware(run_limit=context.max_iterations + 1, exit_behavior="end")]
        if context.max_tool_calls is not None:
            middleware.append(ToolCallLimitMiddleware(run_limit=context.max_tool_calls, exit_behavior="continue"))
        # the date only, as our graphs' prompts say it: a clock in the prompt makes no two requests alike
        system = context.system_prompt.format(now=datetime.now(UTC).strftime("%Y-%m-%d"))
        tools = self.gateway.as_langchain_tools(session, on_result=on_result)
        agent = create_agent(bounded(self.model, context), tools, system_prompt=system, middleware=middleware,
                             checkpointer=self.checkpointer, name="create_agent")
        return agent, set(names)

    def invoke(self, graph_input: dict[str, Any], context: Context | None = None,
               config: dict[str, Any] | None = None, durability: str | None = None) -> dict[str, Any]:
        """`durability`: LangGraph's (when to save checkpoints), passed on as our graphs take it."""
        context = context or Context()
        outcomes: dict[tuple[str, str], str] = {}
        lock = threading.Lock()  # ToolNode runs a reply's calls in parallel

        def record(result: ToolResult) -> None:
            with lock:
                outcomes[(result.name, result.content)] = result.status.value

        agent, names = self._agent(context, record)
        try:
            result = agent.invoke(graph_input, config=config, durability=durability)
        except ModelCallFailed as failed:  # the one line our graphs end with, and their status
            line = describe_model_error(failed.error, self.model)
            line += f" (gave up after {failed.attempts} attempts)" if failed.attempts > 1 else ""
            return {"messages": list(graph_input.get("messages") or []), "final_answer": line, "status": "failed",
                    "steps": [], "iteration": 0}
        return final_state(list(result.get("messages") or []), outcomes, names, context)


def build_create_agent(gateway: Any, checkpointer: Any = None, store: Any = None, *, model: Any) -> CreateAgentBaseline:
    """The builder `evals.graphs` registers (the signature of our graph builders)."""
    return CreateAgentBaseline(gateway, model, checkpointer)


def _turn(messages: list[BaseMessage]) -> list[BaseMessage]:
    last_question = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=-1)
    return messages[last_question + 1:]


def _tool_steps(turn: list[BaseMessage], outcomes: dict[tuple[str, str], str], names: set[str]) -> list[dict]:
    """A step record per tool call, with the gateway's status: calls that never reached the gateway were a tool
    that does not exist (ToolNode answered) or past the tool-call limit (not run)."""
    results = {m.tool_call_id: m for m in turn if isinstance(m, ToolMessage)}
    steps, rounds = [], 0
    for message in turn:
        if not isinstance(message, AIMessage) or not message.tool_calls:
            continue
        rounds += 1
        for call in message.tool_calls:
            reply = results.get(call.get("id") or "")
            text = reply.text if reply is not None else ""
            status = outcomes.get((call["name"], text)) or ("not_run" if call["name"] in names else "unknown_tool")
            steps.append({"step": rounds, "node": "act", "thought": "", "action": call["name"],
                          "action_input": dict(call.get("args") or {}), "observation": text, "status": status,
                          "latency_ms": 0.0, "tokens": 0, "timestamp": ""})
    return steps


def final_state(messages: list[BaseMessage], outcomes: dict[tuple[str, str], str], names: set[str],
                context: Context) -> dict[str, Any]:
    """What the evals read from a graph's final state: answer, status, step records and iterations."""
    turn = _turn(messages)
    replies = [m for m in turn if isinstance(m, AIMessage)]
    steps = _tool_steps(turn, outcomes, names)
    last = replies[-1] if replies else None
    answer = last.text.strip() if last is not None and not last.tool_calls else ""
    limited = len(replies) > context.max_iterations + 1  # the call limit ended the run: its last message says so
    if limited:
        status = "limit_reached"
    elif any(s["status"] == "not_run" for s in steps):
        status = "budget_exhausted"
    else:
        status = "answered" if answer else "no_answer"
    # As our think steps count: every deciding model reply, the answering one included.
    return {"messages": messages, "final_answer": answer, "status": status, "steps": steps,
            "iteration": len(replies) - limited}
