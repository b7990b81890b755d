"""A scripted chat model for graph tests: replies are given up front, every request is recorded.

Used where the offline model cannot produce a behaviour on purpose (malformed calls, empty replies,
a provider that raises). It is langchain-core's `GenericFakeChatModel` plus `bind_tools` and a log.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from pydantic import Field

from reactgraph.tools import ToolError, ToolGateway


class ScriptedChatModel(GenericFakeChatModel):
    """Returns the scripted replies in order; an Exception in the script is raised instead of returned."""

    requests: list[dict[str, Any]] = Field(default_factory=list)

    @classmethod
    def of(cls, *replies: AIMessage | Exception | Callable[[list[BaseMessage]], AIMessage]) -> ScriptedChatModel:
        return cls(messages=iter(replies))

    def bind_tools(self, tools: Iterable[Any], **kwargs: Any):
        return self.bind(tools=list(tools), **kwargs)

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.requests.append({"messages": list(messages), "tools": kwargs.get("tools")})
        reply = next(self.messages)
        if isinstance(reply, Exception):
            raise reply
        if callable(reply):
            reply = reply(list(messages))
        from langchain_core.outputs import ChatGeneration, ChatResult
        return ChatResult(generations=[ChatGeneration(message=reply)])


def call(name: str, call_id: str = "c1", **args: Any) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


def tool_reply(thought: str, *calls: dict[str, Any]) -> AIMessage:
    return AIMessage(content=thought, tool_calls=list(calls))


def notes_gateway(*, found: Callable[[str], bool] = lambda topic: True, broken: bool = False) -> ToolGateway:
    """A gateway with `lookup(topic)` (notes on a topic; `found` says which topics it knows) and, if asked,
    `broken`, a tool that always fails: the tools the graph tests script their models against."""
    gateway = ToolGateway()

    @gateway.tool
    def lookup(topic: str) -> dict:
        """Look a topic up.

        Args:
            topic: What to look up.
        """
        return {"found": found(topic), "text": f"notes on {topic}"}

    if broken:
        @gateway.tool
        def broken(x: int = 0) -> int:
            """Always fails."""
            raise ToolError("backend exploded")

    return gateway


def prompt_notes(messages: list[BaseMessage]) -> str:
    """The notes block of a request (summary, reflection note, lessons: data the nodes put at the start of the
    question's message), or ""."""
    from reactgraph.tools.untrusted import is_notes
    text = next((m.text for m in messages if m.type == "human" and is_notes(m.text)), "")
    return text[:text.find("</notes>") + len("</notes>")] if text else ""


def observed(messages: list[BaseMessage]) -> list[str]:
    """The tool results of a request since its last question, their data frames taken off (in order)."""
    start = max((i for i, m in enumerate(messages) if m.type == "human"), default=-1)
    texts = []
    for message in messages[start + 1:]:
        if message.type == "tool":
            text = message.text
            if text.startswith("<tool_output") and text.endswith("</tool_output>"):
                text = text[text.find("\n") + 1:-len("\n</tool_output>")]
            texts.append(text)
    return texts


def tool_agent(*rounds: list[dict[str, Any]], passed: bool = True,
               answer: Callable[[list[str]], str] = lambda results: "From the tools: " + " | ".join(results)):
    """A test model (reactgraph.testing.FunctionModel) that gets any graph to call tools, with no question parsing.

    ReAct (and each Reflexion trial): the think request makes round k's calls, k counted from the tool-calling
    replies since the question, then answers. Plan-and-Solve: a plan of one step per round (its first call's tool),
    each step making its round's calls once, then the step's result. Every answer is `answer` of the tool results
    the request shows. Structured requests: the closing check finds nothing missing, a reflection says to go on
    until the rounds are done, an evaluation is `passed`, a lesson says to try again, a summary is "earlier turns".
    Plan-and-Solve's closing answer, whose request shows the step results as notes, not as tool results, answers
    from the steps' results. The model's `requests` log every request with its purpose.
    """
    from reactgraph.testing import FunctionModel, RequestInfo

    steps: list[int] = []  # the plan steps whose calls were made
    answered: list[int] = []  # the plan steps whose result was given
    results: list[str] = []  # what each step observed

    def made(messages: list[BaseMessage]) -> int:
        start = max((i for i, m in enumerate(messages) if m.type == "human"), default=-1)
        return sum(1 for m in messages[start + 1:] if isinstance(m, AIMessage) and m.tool_calls)

    def reply(messages: list[BaseMessage], info: RequestInfo) -> Any:
        if info.purpose == "plan":
            return {"steps": [{"goal": f"part {i + 1}", "tool": r[0]["name"]} for i, r in enumerate(rounds)],
                    "parts": [f"part {i + 1}" for i in range(len(rounds))]}
        if info.purpose == "check":
            return {"parts": ["the question"], "missing": []}
        if info.purpose == "reflect":
            done = made(messages) >= len(rounds)
            return {"enough_information": done, "tool_error": False, "need_other_tool": False,
                    "repeated_call": False, "note": "", "parts": [], "missing": []}
        if info.purpose == "evaluate":
            return {"passed": passed, "reason": "scripted"}
        if info.purpose == "lesson":
            return {"lesson": "Try again."}
        if info.purpose == "summarize":
            return {"summary": "earlier turns"}
        if info.purpose == "step":
            if len(steps) == len(answered) < len(rounds):  # a new step: its round's calls
                steps.append(len(steps))
                return AIMessage("", tool_calls=list(rounds[steps[-1]]))
            answered.append(len(steps))  # its results came back: the step's result
            results.extend(observed(messages))
            return answer(observed(messages))
        if info.purpose == "think" and info.tool_names:
            k = made(messages)
            if k < len(rounds):
                return AIMessage("", tool_calls=list(rounds[k]))
        return answer(observed(messages) or results)

    return FunctionModel(function=reply)


def by_purpose(**scripts: Any):
    """A `reactgraph.testing.FunctionModel` answering each request from the script for its purpose (`think=`,
    `reflect=`, `answer=`, `check=`, `plan=`, `step=`, `evaluate=`, `lesson=`, `respond=`, …): a list is taken in
    order, its last reply repeated once the list is used up; a callable is called with (messages, info); anything
    else is the reply to every request of that purpose. A request of a purpose not scripted fails, naming it."""
    from reactgraph.testing import FunctionModel

    taken: dict[str, int] = {}

    def reply(messages: list[BaseMessage], info: Any) -> Any:
        if info.purpose not in scripts:
            raise AssertionError(f"by_purpose: no script for a {info.purpose!r} request")
        script = scripts[info.purpose]
        if isinstance(script, list):
            n = taken.get(info.purpose, 0)
            taken[info.purpose] = n + 1
            script = script[min(n, len(script) - 1)]
        return script(messages, info) if callable(script) else script

    return FunctionModel(function=reply)


def verdict(enough: bool = True, *, parts: list[str] | None = None, missing: list[str] | None = None,
            tool_error: bool = False, note: str = "") -> dict[str, Any]:
    """A reflection verdict (`ReflectionVerdict`'s fields) as a structured reply."""
    return {"enough_information": enough, "tool_error": tool_error, "need_other_tool": False,
            "repeated_call": False, "note": note, "parts": list(parts or []), "missing": list(missing or [])}
