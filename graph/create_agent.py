"""`create_agent` with LangChain's signature, returning the explicit ReAct graph: swap one import.

```python
from langchain.agents import create_agent      # LangChain's loop: model ⇄ tools
from reactgraph import create_agent            # the same program, on think → act → observe → reflect
```

Every argument of LangChain's `create_agent` is taken, and each is honoured or refused in one line:

- `model`: a chat model object, or a string — the project's own spec (`"openai:gpt-4o-mini"`,
  `"anthropic:…"`, `"offline"`, `"test"`) or a bare OpenAI or Anthropic model name (`"gpt-4o"`,
  `"claude-sonnet-4-6"`), loaded with the run's bounds and retries; any other string goes to LangChain's
  `init_chat_model` (`"google_genai:gemini-2.5-flash"`, `"ollama:llama3"`, …) as LangChain loads it.
- `tools`: LangChain tools and plain functions, run through the tool gateway; a provider's built-in tool given
  as a dict (`{"type": "web_search"}`) is refused: the gateway runs only what it can run itself.
- `system_prompt`: the agent's instructions, first in the agent's system message, before the loop's own
  protocol (which the ReAct loop needs to read a reply); a `SystemMessage` is taken as its text.
- `middleware`, `response_format`: as `build_react_graph` takes them (docs/middleware.md,
  docs/structured-output.md).
- `state_schema`: its fields join the state (the graph's own fields win a clash); `context_schema`: the
  runtime context's type, which must be `reactgraph.Context` or a subclass (the nodes read its fields).
- `checkpointer`, `store`, `debug`, `name`, `cache`: as LangGraph's `compile` takes them.
- `interrupt_before` / `interrupt_after`: node names; `create_agent`'s `"model"` and `"tools"` are our `think`
  and `act`, and any node of ours may be named.
- `transformers`: LangChain's stream transformers have no counterpart here and are refused.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import SystemMessage

from reactgraph.errors import ReactGraphError
from reactgraph.graph.react import ReactGraph, build_react_graph
from reactgraph.nodes.context import Context

# create_agent's node names → ours
_NODES = {"model": "think", "tools": "act"}


class CreateAgentError(ReactGraphError, ValueError):
    """An argument of `create_agent` this graph cannot honour (one line says which, and what to do)."""


def create_agent(model: str | BaseChatModel, tools: Sequence[Any] | None = None, *,
                 system_prompt: str | SystemMessage | None = None, middleware: Sequence[Any] = (),
                 response_format: Any = None, state_schema: type | None = None, context_schema: type | None = None,
                 checkpointer: Any = None, store: Any = None, interrupt_before: list[str] | None = None,
                 interrupt_after: list[str] | None = None, debug: bool = False, name: str | None = None,
                 cache: Any = None, transformers: Sequence[Any] | None = None) -> ReactGraph:
    """The explicit ReAct graph for a `create_agent` call (see the module's notes for each argument)."""
    if transformers:
        raise CreateAgentError("transformers= (LangChain's stream transformers) has no counterpart in this graph: "
                               "read its stream modes instead (docs/python-api.md)")
    if context_schema is not None and not (isinstance(context_schema, type) and issubclass(context_schema, Context)):
        raise CreateAgentError(f"context_schema={getattr(context_schema, '__name__', context_schema)!s}: this graph's "
                               "nodes read reactgraph.Context; give Context or a subclass of it with your fields")
    built_in = [tool for tool in tools or () if isinstance(tool, dict)]
    if built_in:
        raise CreateAgentError(f"a provider's built-in tool ({built_in[0].get('type') or built_in[0]!r}) cannot run "
                               "through the tool gateway: give LangChain tools or functions")
    prompt = [_system_prompt(system_prompt)] if system_prompt is not None else []
    graph = build_react_graph(tools=list(tools or ()), model=chat_model(model), response_format=response_format,
                              middleware=[*prompt, *middleware], state_schema=state_schema,
                              context_schema=context_schema or Context, name=name or "react")
    nodes = set(graph.builder.nodes)
    return graph.builder.compile(checkpointer=checkpointer, store=store, debug=debug, name=name or "react",
                                 cache=cache, interrupt_before=_our_nodes(interrupt_before, nodes),
                                 interrupt_after=_our_nodes(interrupt_after, nodes))


def chat_model(model: str | BaseChatModel) -> BaseChatModel:
    """A model object as given; a string as the project's spec where it is one, else through `init_chat_model`."""
    if isinstance(model, BaseChatModel):
        return model
    if not isinstance(model, str) or not model.strip():
        raise CreateAgentError(f"model= takes a chat model or a model string, not {type(model).__name__}")
    from reactgraph.models.loader import ModelConfigError, load_chat_model, parse_spec

    try:  # the project's specs, bare OpenAI/Anthropic names and init_chat_model's providers (models/loader.py)
        parse_spec(model)
    except ModelConfigError:  # a bare name of another provider: init_chat_model infers it
        from langchain.chat_models import init_chat_model

        try:
            return init_chat_model(model)
        except (ImportError, ValueError) as exc:
            raise CreateAgentError(f"model={model!r}: {str(exc).splitlines()[0]}") from None
    return load_chat_model(model)


def _system_prompt(prompt: str | SystemMessage) -> Any:
    """The agent's instructions as the outermost wrap of its model request: first in its system message."""
    from langchain.agents.middleware import AgentMiddleware

    text = prompt.text if isinstance(prompt, SystemMessage) else str(prompt)

    class SystemPrompt(AgentMiddleware):
        """create_agent's `system_prompt=`, put before the loop's own system prompt."""

        def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
            return handler(_with_prompt(request, text))

        async def awrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
            return await handler(_with_prompt(request, text))

    return SystemPrompt()


def _with_prompt(request: Any, text: str) -> Any:
    ours = request.system_message.text if request.system_message is not None else ""
    return request.override(system_message=SystemMessage(f"{text}\n\n{ours}" if ours else text))


def _our_nodes(names: list[str] | None, nodes: set[str]) -> list[str] | None:
    if not names:
        return None
    ours = [_NODES.get(name, name) for name in names]
    if unknown := [name for name, our in zip(names, ours, strict=True) if our not in nodes]:
        raise CreateAgentError(f"interrupt at {unknown[0]!r}: no such node; this graph's are "
                               f"{', '.join(sorted(nodes))} ('model' is think, 'tools' is act)")
    return ours
