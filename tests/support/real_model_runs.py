"""Runs against a real small model (or its cassettes), and what such a run may be held to: the real-model tier
(tests/real_model/), the cassette tests (tests/test_cassettes.py), the recorder and benchmarks/real_model.py.

Only behaviour is checked, never whether a 135M-parameter model is right: the run ends with one of the statuses,
its requests are bounded, its tokens are counted, and its status is one the evidence supports — `answered` needs a
final answer, not one the server cut at its token limit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import HumanMessage

STATUSES = ("answered", "partial", "no_answer", "limit_reached", "budget_exhausted", "failed")
GRAPHS = ("react", "plan_solve", "reflexion")
PROTOCOLS = ("tools", "text")
MAX_ITERATIONS = 2
# Requests a run may make at most with MAX_ITERATIONS rounds: per round a think (or a plan step) and a
# reflection, a retry of each after a failure (the issue: a timeout retried at most once), and around them a plan,
# a closing answer and its self-check, a summary. Reflexion runs up to two trials of that.
REQUEST_BOUND = {"react": 4 * MAX_ITERATIONS + 6, "plan_solve": 4 * MAX_ITERATIONS + 8,
                 "reflexion": 2 * (4 * MAX_ITERATIONS + 6) + 2}
# The longest a run may take on two shared cores: its requests, each a reply bounded by the product's max_tokens
# (else the server's 128), well inside it. A bound on waiting, not a measure of speed (benchmarks/real_model.py is):
# machines here differ by ~3x for the same work, and plan_solve in the text protocol took 181 s on a slow one,
# so the bound leaves room for that.
RUN_CEILING_S = 450.0


@dataclass(frozen=True)
class Scenario:
    """One question put to one graph in one protocol; `first_call`: a tool call played as the model's first reply
    (the rest of the run is the real model's), for replies the model gives too rarely to wait for."""

    name: str
    graph: str
    protocol: str
    question: str
    context: dict[str, Any] = field(default_factory=dict)
    first_call: tuple[str, str] | None = None

    def as_json(self) -> dict[str, Any]:
        return {"graph": self.graph, "protocol": self.protocol, "question": self.question, "context": self.context,
                **({"first_call": list(self.first_call)} if self.first_call else {})}

    @classmethod
    def from_json(cls, name: str, data: dict[str, Any]) -> Scenario:
        graph, protocol = data.get("graph"), data.get("protocol")
        if graph not in GRAPHS or protocol not in PROTOCOLS or not isinstance(data.get("question"), str):
            raise ValueError(f"{name}: not a scenario: {data!r:.200}")
        first = data.get("first_call")
        if first is not None and not (isinstance(first, list) and len(first) == 2
                                      and all(isinstance(x, str) and len(x) < 500 for x in first)):
            raise ValueError(f"{name}: first_call must be [tool name, arguments]")
        return cls(name, graph, protocol, data["question"], dict(data.get("context") or {}),
                   tuple(first) if first else None)


ARITHMETIC = "What is 17 * 23?"
WEATHER = "What is the weather in Paris today?"
# Questions the small model answers without a tool (a direct answer): the closing self-check is what judges them.
DIRECT_QUESTIONS = (ARITHMETIC, "What is the capital of France?", "Who wrote Hamlet?", "What is 2 + 2?")
# A tool call whose arguments are not JSON (an expression left unquoted), in the shape the issue saw the model write.
MALFORMED_CALL = ("calculator", '{"expression": 17 * 23}')
# Every graph in every protocol: the cassettes record each; the tier runs TIER_SCENARIOS of them through the Python
# API (and the rest of the combinations through the CLI and the service), so its wall time stays a few minutes.
SCENARIOS = (
    Scenario("react-tools", "react", "tools", ARITHMETIC),
    Scenario("react-text", "react", "text", ARITHMETIC),
    Scenario("plan_solve-tools", "plan_solve", "tools", WEATHER),
    Scenario("plan_solve-text", "plan_solve", "text", WEATHER),
    Scenario("reflexion-tools", "reflexion", "tools", ARITHMETIC),
    Scenario("reflexion-text", "reflexion", "text", WEATHER),
)
# The proofs of issue 39 (tests/real_model/test_real_model_checks.py), recorded too: the direct answers whose check
# must be read, and a run whose first reply is a malformed tool call.
PROOF_SCENARIOS = (
    *(Scenario(f"react-direct-{i}", "react", "tools", q) for i, q in enumerate(DIRECT_QUESTIONS[1:], 1)),
    Scenario("react-malformed", "react", "tools", ARITHMETIC, first_call=MALFORMED_CALL),
)
DIRECT_SCENARIOS = ("react-tools", *(f"react-direct-{i}" for i in range(1, len(DIRECT_QUESTIONS))))
TIER_SCENARIOS = tuple(s for s in SCENARIOS if s.name in ("react-tools", "plan_solve-text", "reflexion-tools"))


def forwarding(upstream: str) -> Any:
    """A responder for the local test server (support.provider_server) that hands each request to an OpenAI-
    compatible server at `upstream` (its base URL without /v1) and plays its answer back, unstreamed."""
    import httpx

    from support.provider_server import Reply

    def forward(body: dict[str, Any]) -> Reply:
        sent = {**body, "stream": False}
        sent.pop("stream_options", None)
        answer = httpx.post(f"{upstream}/v1/chat/completions", json=sent, timeout=RUN_CEILING_S)
        if answer.status_code != 200:
            return Reply(status=answer.status_code, error=answer.text[:2000])
        payload = answer.json()
        choice = payload["choices"][0]
        message = choice.get("message") or {}
        named = [(c["function"]["name"], c["function"]["arguments"]) for c in message.get("tool_calls") or []]
        usage = {k: v for k, v in (payload.get("usage") or {}).items()
                 if k in ("prompt_tokens", "completion_tokens", "total_tokens")}
        return Reply(content=message.get("content"), tool_calls=named, cut_off=choice.get("finish_reason") == "length",
                     usage=usage or None)

    return forward


def build(graph: str) -> Any:
    from reactgraph.graph import build_plan_solve_graph, build_react_graph, build_reflexion_graph

    return {"react": build_react_graph, "plan_solve": build_plan_solve_graph,
            "reflexion": build_reflexion_graph}[graph]()


def run(scenario: Scenario, model: str) -> dict[str, Any]:
    """The scenario through the Python API (a compiled graph, no checkpointer): the final state."""
    from reactgraph.graph import Context

    context = Context(model=model, protocol=scenario.protocol,
                      max_iterations=MAX_ITERATIONS, **scenario.context)
    return build(scenario.graph).invoke({"messages": [HumanMessage(scenario.question)]}, context=context)


def tokens(usage: dict[str, Any] | None) -> tuple[int, int]:
    """(prompt, completion) tokens of a run's usage."""
    usage = usage or {}
    return int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0)


def outcome(output: dict[str, Any]) -> dict[str, Any]:
    """What `problems` reads from a run's output: the final state (Python API, service) or `ask --json`'s object."""
    return {"status": output.get("status") or "", "final_answer": output.get("final_answer", output.get("answer")),
            "usage": output.get("usage"), "coverage": output.get("coverage")}


def problems(run_output: dict[str, Any], requests: int, bound: int, truncated: list[str]) -> list[str]:
    """What in a run's outcome the evidence does not support (empty: nothing). `truncated` holds the content of
    each reply the server cut at its token limit."""
    status, final_answer, usage, coverage = outcome(run_output).values()
    found = []
    if status not in STATUSES:
        found.append(f"status {status!r} is not one of {STATUSES}")
    # every output says who gave the coverage account: the model, or nobody ("unchecked")
    if not isinstance(coverage, dict) or coverage.get("by") not in ("model", "unchecked"):
        found.append(f"no coverage account (coverage.by): {coverage!r}")
    elif status == "answered" and coverage.get("missing"):
        found.append(f"answered with parts missing: {coverage.get('missing')!r}")
    prompt, completion = tokens(usage)
    if prompt <= 0 or completion <= 0:
        found.append(f"tokens not counted: usage {usage!r}")
    if not 0 < requests <= bound:
        found.append(f"{requests} model requests, bound {bound}")
    answer = (final_answer or "").strip()
    if status == "answered" and not answer:
        found.append("answered with an empty answer")
    head = answer[:60]
    if status == "answered" and head and any(head in cut for cut in truncated):
        found.append(f"answered with a reply cut at the token limit: {answer[:120]!r}")
    return found
