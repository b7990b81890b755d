"""LangChain's `create_agent` as a graph the evals compare: the baseline every LangGraph user would pick first.

It gets what our graphs get: the same model, the run's gateway tools through `as_langchain_tools()` (the same
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
from datetime import UTC, datetime
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from reactgraph.graph import Context
from reactgraph.tools import ToolSession
from reactgraph.tools.call import ToolResult


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
        middleware: list[Any] = [ModelCallLimitMiddleware(run_limit=context.max_iterations + 1, exit_behavior="end")]
        if context.max_tool_calls is not None:
            middleware.append(ToolCallLimitMiddleware(run_limit=context.max_tool_calls, exit_behavior="continue"))
        system = context.system_prompt.format(now=datetime.now(UTC).strftime("%Y-%m-%d %H:%M"))
        agent = create_agent(self.model, self.gateway.as_langchain_tools(session, on_result=on_result),
                             system_prompt=system, middleware=middleware, checkpointer=self.checkpointer,
                             name="create_agent")
        return agent, set(names)

    def invoke(self, graph_input: dict[str, Any], context: Context | None = None,
               config: dict[str, Any] | None = None) -> dict[str, Any]:
        context = context or Context()
        outcomes: dict[tuple[str, str], str] = {}
        lock = threading.Lock()  # ToolNode runs a reply's calls in parallel

        def record(result: ToolResult) -> None:
            with lock:
                outcomes[(result.name, result.content)] = result.status.value

        agent, names = self._agent(context, record)
        result = agent.invoke(graph_input, config=config)
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
