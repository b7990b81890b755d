"""Test models shipped with the product (`reactgraph.testing`), as pydantic-ai ships `TestModel` and `FunctionModel`.

Three chat models that stand in for a language model in tests of your graphs, tools and middleware, with no
network and no scripted question parsing:

- `ScriptedChatModel(replies)`: the replies in order. A reply is an `AIMessage`, a string (a text reply), a dict
  or pydantic instance (a structured reply: the arguments of the one schema the request asks for), an exception
  (raised), or a callable of the request's messages (called, and its result used as above).
- `FunctionModel(function)`: every reply from `function(messages, info)`; `info` is the `RequestInfo`.
- `SchemaTestModel()`: calls every bound tool named by the question (`only=` picks them) once, with arguments
  built from its JSON schema, then answers with what they returned (models/schema_test_model.py, `--model test`).

Each honours what the graphs ask of a model: `bind_tools`, `with_structured_output` (the schema offered as the
one tool to call, `include_raw` too), stop sequences, and the request's purpose (`think`, `reflect`, `plan`, …:
the run metadata the model gateway sets, models/purpose.py). The scripted and function models record every
request (`requests`: messages, tools, the structured schema, stop, purpose) for the test to assert on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, ConfigDict, Field

from reactgraph.models.purpose import purpose_of
from reactgraph.models.schema_test_model import SchemaTestModel, example_value

__all__ = ["FunctionModel", "RequestInfo", "SchemaTestModel", "ScriptedChatModel", "example_value"]


@dataclass(frozen=True)
class RequestInfo:
    """One request as a test model sees it: the messages, the tools bound (OpenAI tool dicts, the structured
    schema's included), the structured schema asked for (its name and JSON schema, else None), the stop
    sequences and the purpose the model gateway tagged it with (None outside the gateway)."""

    messages: list[BaseMessage]
    tools: list[dict[str, Any]] = field(default_factory=list)
    schema: dict[str, Any] | None = None
    stop: list[str] | None = None
    purpose: str | None = None

    @property
    def tool_names(self) -> list[str]:
        """The names of the bound tools, the structured schema's left out."""
        forced = self.schema["name"] if self.schema else None
        return [t["function"]["name"] for t in self.tools if t["function"]["name"] != forced]


Reply = AIMessage | str | dict[str, Any] | BaseModel


def _forced(tools: list[dict[str, Any]], tool_choice: Any) -> dict[str, Any] | None:
    """The structured schema a request forces (`with_structured_output`: one tool, tool_choice any/its name)."""
    if isinstance(tool_choice, dict):
        tool_choice = tool_choice.get("function", {}).get("name") or tool_choice.get("name")
    functions = [t["function"] for t in tools]
    if tool_choice in ("any", "required", True) and len(functions) == 1:
        return functions[0]
    return next((f for f in functions if isinstance(tool_choice, str) and f["name"] == tool_choice), None)


def _as_message(reply: Reply, info: RequestInfo, number: int) -> AIMessage:
    """A reply as the AIMessage the model returns: a structured value becomes the call of the asked schema."""
    if isinstance(reply, AIMessage):
        return reply
    if isinstance(reply, str):
        return AIMessage(reply)
    if info.schema is None:
        raise TypeError(f"test model: a structured reply ({type(reply).__name__}) to request #{number}, which "
                        f"asks for no schema (purpose {info.purpose})")
    args = reply.model_dump(mode="json") if isinstance(reply, BaseModel) else dict(reply)
    return AIMessage("", tool_calls=[{"name": info.schema["name"], "args": args, "id": f"test_{number}",
                                      "type": "tool_call"}])


class _RequestModel(BaseChatModel):
    """What the scripted and function models share: tool binding, the request log, the reply's conversion."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    model_name: str = "test"
    requests: list[RequestInfo] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "reactgraph-test"

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: Any = None,
                   **kwargs: Any) -> Runnable[LanguageModelInput, AIMessage]:
        """Bind tools in any form LangChain converts to an OpenAI tool; they are recorded with each request."""
        if tool_choice is not None:
            kwargs["tool_choice"] = tool_choice
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, tools: list[dict[str, Any]] | None = None,
                  tool_choice: Any = None, **kwargs: Any) -> ChatResult:
        info = RequestInfo(list(messages), list(tools or []), _forced(list(tools or []), tool_choice), stop,
                           purpose_of(run_manager))
        self.requests.append(info)
        message = _as_message(self._reply(info), info, len(self.requests))
        message.response_metadata = {"model_name": self.model_name, **(message.response_metadata or {})}
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _reply(self, info: RequestInfo) -> Reply:
        raise NotImplementedError


class ScriptedChatModel(_RequestModel):
    """Returns the scripted replies in order; an exception in the script is raised, a callable is called with the
    request's messages. A request after the last reply fails, naming its number and purpose."""

    replies: list[Any] = Field(default_factory=list)
    position: int = 0

    @classmethod
    def of(cls, *replies: Reply | Exception | Callable[[list[BaseMessage]], Reply]) -> ScriptedChatModel:
        return cls(replies=list(replies))

    def _reply(self, info: RequestInfo) -> Reply:
        if self.position >= len(self.replies):
            raise IndexError(f"ScriptedChatModel: no reply left for request #{len(self.requests)} "
                             f"(purpose {info.purpose}); {len(self.replies)} were scripted")
        reply = self.replies[self.position]
        self.position += 1
        if isinstance(reply, BaseException):
            raise reply
        return reply(list(info.messages)) if callable(reply) else reply

    @property
    def purposes(self) -> list[str | None]:
        """The purposes of the requests so far, in order."""
        return [r.purpose for r in self.requests]


class FunctionModel(_RequestModel):
    """Every reply from `function(messages, info)`: an AIMessage, a text, or a structured value (dict or pydantic
    instance) for the schema `info.schema` names."""

    function: Callable[[list[BaseMessage], RequestInfo], Reply]

    def _reply(self, info: RequestInfo) -> Reply:
        return self.function(list(info.messages), info)

