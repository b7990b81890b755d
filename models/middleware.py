"""LangChain's `wrap_model_call` middleware around the agent's model request, inside the model gateway.

A graph built with `middleware=[...]` gives its model gateway the middleware that wrap model calls
(`ModelWraps`). For the requests that are "the agent's model request" (`purposes`: ReAct's `think`), the gateway's
request step (step 3 of models/gateway.py) goes through them as `create_agent` composes them: the first
middleware listed is the outermost, each gets a LangChain `ModelRequest` — the model, the messages without the
system message, the system message, the tools, `tool_choice`, `model_settings`, the graph's state and runtime — and
a handler that makes the request as the request then says. A wrapper may change the request (another model, fewer
tools, an edited prompt), call the handler again (a retry), or answer without it (a cached or canned reply).

Where it sits among the gateway's own policies, and why: inside the model choice, the bound on the reply's length
and the tool binding (the handler applies them to whatever model and tools the request names), outside the usage,
retry and fallback steps (a wrapper's retries are its own; what finally failed or answered is counted and, when
it failed for good, handled by our retry and fallback as any failed request is). So a wrapper can never make a
reply longer than the run's bound, and its own work is never counted twice.

The request's tools are the run's tools as LangChain tool objects that describe them (name, description,
arguments) and refuse to run: tools run only through the tool gateway. Our own tool for the inline reflection
verdict stays a plain schema dict, as a provider's built-in tool would be, so a middleware that selects tools
does not take it for one of the user's. What a handler cannot honour is refused in one line: a `response_format`
set by a middleware (the graph's own `response_format=` is the way), a tool that is neither a stand-in nor a
schema, an `ExtendedModelResponse` carrying a `Command`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, cast

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.tools import BaseTool

from reactgraph.errors import ReactGraphError

if TYPE_CHECKING:
    from reactgraph.models.gateway import ModelCall

# The handler the gateway gives the outermost wrapper: the request's model and the call it now describes → the
# raw reply (an AIMessage). Awaited under `ainvoke`.
Send = Callable[[Any, "ModelCall"], Any]


class MiddlewareRequestError(ReactGraphError, ValueError):
    """A middleware asked for something the agent's model request cannot carry (one line says what)."""


@dataclass(frozen=True)
class ModelWraps:
    """The `wrap_model_call` middleware of one graph, in the order given, and the purposes they wrap."""

    middleware: tuple[Any, ...]
    purposes: frozenset[str] = frozenset({"think"})

    def applies(self, purpose: str) -> bool:
        return bool(self.middleware) and purpose in self.purposes

    def invoke(self, model: Any, call: ModelCall, state: Any, runtime: Any, send: Send) -> Any:
        """The reply to `call` through the wrappers' `wrap_model_call`, outermost first."""
        def innermost(request: Any) -> Any:
            return _response(send(request.model, _call_of(request, call)))

        handler: Callable[[Any], Any] = innermost
        for middleware in reversed(self.middleware):
            handler = _layer(middleware.wrap_model_call, handler)
        return _message_of(handler(_request(model, call, state, runtime)))

    async def ainvoke(self, model: Any, call: ModelCall, state: Any, runtime: Any, send: Send) -> Any:
        """The same with `awrap_model_call` and an awaited handler."""
        async def innermost(request: Any) -> Any:
            return _response(await send(request.model, _call_of(request, call)))

        handler: Callable[[Any], Any] = innermost
        for middleware in reversed(self.middleware):
            handler = _alayer(middleware.awrap_model_call, handler)
        return _message_of(await handler(_request(model, call, state, runtime)))


def _layer(wrap: Callable[[Any, Any], Any], inner: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda request: _response(wrap(request, inner))


def _alayer(wrap: Callable[[Any, Any], Any], inner: Callable[[Any], Any]) -> Callable[[Any], Any]:
    async def layer(request: Any) -> Any:
        return _response(await wrap(request, inner))
    return layer


# --- our call ↔ LangChain's request and response ------------------------------------------------------------

def _request(model: Any, call: ModelCall, state: Any, runtime: Any) -> Any:
    from langchain.agents.middleware import ModelRequest

    messages = list(call.messages)
    system = messages.pop(0) if messages and isinstance(messages[0], SystemMessage) else None
    tools: list[BaseTool | dict[str, Any]] = [stand_in(schema) if _is_function(schema) and not _internal(schema)
                                              else schema for schema in call.tools]
    return ModelRequest(model=model, messages=cast(list[Any], messages), system_message=cast(Any, system),
                        tools=tools, tool_choice=None if call.tool_choice == "auto" else call.tool_choice,
                        state=state if state is not None else cast(Any, {"messages": messages}), runtime=runtime)


def _call_of(request: Any, call: ModelCall) -> ModelCall:
    """The call as the (possibly changed) request now describes it."""
    if request.response_format is not None:
        raise MiddlewareRequestError("a middleware set the agent's model request's response_format: give the graph "
                                     "response_format= instead (the closing answer is structured there)")
    messages: list[BaseMessage] = list(request.messages)
    if request.system_message is not None:
        messages.insert(0, request.system_message)
    return replace(call, messages=messages, tools=tuple(_schema_of(tool) for tool in request.tools),
                   tool_choice=request.tool_choice or "auto", model_settings=dict(request.model_settings or {}))


def _response(result: Any) -> Any:
    """A wrapper's or the handler's result as LangChain's `ModelResponse` (an AIMessage is one too)."""
    from langchain.agents.middleware import ModelResponse
    from langchain.agents.middleware.types import ExtendedModelResponse

    if isinstance(result, ExtendedModelResponse):
        if result.command is not None:
            raise MiddlewareRequestError("a wrap_model_call middleware returned a Command with the reply: "
                                         "state updates from wrap_model_call are not applied by this graph")
        return result.model_response
    if isinstance(result, ModelResponse):
        return result
    if isinstance(result, AIMessage):
        return ModelResponse(result=[result])
    raise MiddlewareRequestError(f"a wrap_model_call middleware returned a {type(result).__name__}, "
                                 "not a ModelResponse or an AIMessage")


def _message_of(response: Any) -> AIMessage:
    replies = [message for message in response.result if isinstance(message, AIMessage)]
    if not replies:
        raise MiddlewareRequestError("a wrap_model_call middleware's response holds no AIMessage")
    return replies[-1]


# --- the run's tools as LangChain tool objects ----------------------------------------------------------------

_INTERNAL = frozenset({"InlineReflection"})  # the inline verdict (nodes/react.py): no tool of the user's


def _is_function(schema: Any) -> bool:
    return isinstance(schema, dict) and isinstance(schema.get("function"), dict) and "name" in schema["function"]


def _internal(schema: dict[str, Any]) -> bool:
    return schema["function"]["name"] in _INTERNAL


def stand_in(schema: dict[str, Any]) -> BaseTool:
    """A LangChain tool that describes the tool of a bound OpenAI schema and refuses to run (one per schema)."""
    from reactgraph.tools.middleware import describing_tool

    function = schema["function"]
    return cast(BaseTool, describing_tool(schema, function["name"], function.get("description") or "",
                                          function.get("parameters") or {"type": "object", "properties": {}},
                                          metadata={"reactgraph_schema": schema}))


def _schema_of(tool: Any) -> dict[str, Any]:
    if isinstance(tool, dict):
        return tool
    if isinstance(tool, BaseTool):
        known = (tool.metadata or {}).get("reactgraph_schema")
        if isinstance(known, dict):
            return known
        from langchain_core.utils.function_calling import convert_to_openai_tool
        return convert_to_openai_tool(tool)  # a middleware's own tool: the gateway must know it to run it
    raise MiddlewareRequestError(f"a middleware put a {type(tool).__name__} among the request's tools: "
                                 "give a LangChain tool or an OpenAI tool schema")


def wrappers_of(middleware: Sequence[Any]) -> tuple[Any, ...]:
    """The middleware that wrap model calls (sync or async overridden), in the order given."""
    from langchain.agents.middleware import AgentMiddleware

    return tuple(m for m in middleware
                 if type(m).wrap_model_call is not AgentMiddleware.wrap_model_call
                 or type(m).awrap_model_call is not AgentMiddleware.awrap_model_call)
