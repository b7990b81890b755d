"""`ToolMeta`: everything the gateway needs to know about one tool, from any source."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel

from reactgraph.tools.errors import ToolRegistrationError


@dataclass(frozen=True, slots=True)
class ToolMeta:
    """A registered tool: its contract with the model (name, description, params) and its limits."""

    name: str
    description: str
    params_model: type[BaseModel]
    # Called with the validated arguments as keywords; sync callables run in a worker thread.
    run: Callable[..., Any]
    timeout_s: float = 10.0
    enabled: bool = True
    tags: tuple[str, ...] = ()
    # Calls of this tool allowed in flight at once (None: only the gateway-wide limit applies).
    max_concurrency: int | None = None
    # Attempts for transient failures (1 = no retry).
    max_attempts: int = 3
    # Longest result text the model gets (None: the gateway's `max_result_chars`); longer is cut, with a note.
    max_result_chars: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # Derived once: asking inspect on every call shows up in the gateway's per-call overhead.
    is_async: bool = field(init=False, repr=False, compare=False, default=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "is_async", inspect.iscoroutinefunction(self.run))
        if not self.name or not self.name.replace("_", "").replace("-", "").isalnum():
            raise ToolRegistrationError(
                f"tool name {self.name!r} must be non-empty letters, digits, '_' or '-' "
                "(model providers reject other names)"
            )
        if self.timeout_s <= 0:
            raise ToolRegistrationError(f"tool {self.name!r}: timeout_s must be > 0")
        if self.max_attempts < 1:
            raise ToolRegistrationError(f"tool {self.name!r}: max_attempts must be >= 1")
        if self.max_result_chars is not None and self.max_result_chars < 1:
            raise ToolRegistrationError(f"tool {self.name!r}: max_result_chars must be >= 1")

    def openai_schema(self) -> dict[str, Any]:
        """The tool in OpenAI function-calling format, as model providers expect it."""
        parameters = convert_to_openai_tool(self.params_model)["function"].get("parameters", {})
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": parameters},
        }

    @classmethod
    def from_function(cls, fn: Callable[..., Any], *, name: str | None = None,
                      description: str | None = None, **options: Any) -> ToolMeta:
        """Build from a typed function: the schema comes from its hints, the texts from its docstring."""
        is_async = inspect.iscoroutinefunction(fn)
        try:
            structured = StructuredTool.from_function(
                func=None if is_async else fn, coroutine=fn if is_async else None, name=name,
                description=description, parse_docstring=True, error_on_invalid_docstring=False,
            )
        except (ValueError, TypeError) as exc:
            raise ToolRegistrationError(f"cannot derive a schema for {fn!r}: {exc}") from exc
        return cls(name=structured.name, description=structured.description,
                   params_model=_pydantic_model(structured.args_schema, fn), run=fn, **options)

    @classmethod
    def from_langchain(cls, tool: BaseTool, **options: Any) -> ToolMeta:
        """Wrap a LangChain tool so it runs through the gateway's pipeline like any other."""
        schema = tool.get_input_schema()

        async def run(**kwargs: Any) -> Any:
            return await tool.ainvoke(kwargs)

        return cls(name=tool.name, description=tool.description or tool.name,
                   params_model=_pydantic_model(schema, tool), run=run, **options)


def _pydantic_model(schema: object, source: object) -> type[BaseModel]:
    """`schema` if it is a pydantic v2 model class: the gateway validates arguments with `model_validate`."""
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return schema
    raise ToolRegistrationError(f"cannot register {source!r}: its argument schema is not a pydantic v2 model")


def as_tool_meta(tool: ToolMeta | BaseTool | Callable[..., Any], **options: Any) -> ToolMeta:
    """A `ToolMeta` from any accepted form: a `ToolMeta`, a LangChain tool, or a typed function."""
    if isinstance(tool, ToolMeta):
        return tool
    if isinstance(tool, BaseTool):
        return ToolMeta.from_langchain(tool, **options)
    if callable(tool):
        return ToolMeta.from_function(tool, **options)
    raise ToolRegistrationError(f"cannot register {tool!r}: expected ToolMeta, a LangChain tool or a function")
