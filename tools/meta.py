"""`ToolMeta`: everything the gateway needs to know about one tool, from any source — a typed function, a LangChain
tool, MCP, or a JSON schema.

A tool's arguments are described by a pydantic model or by a JSON schema. A JSON schema reaches the model
unchanged, is checked once at registration (`compile_schema`: its `$schema` dialect, else Draft 2020-12; an
invalid one is a one-line error) and validates every call (`field_errors`, reported in the shape of pydantic's
errors and worded as they are).
"""

from __future__ import annotations

import copy
import functools
import inspect
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from jsonschema import Draft202012Validator, SchemaError, validators
from jsonschema.protocols import Validator
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel

from reactgraph.tools.call import ToolError, ToolOutput, ToolRegistrationError
from reactgraph.tools.langchain_adapter import InjectedArgs, injected_args

# What a person may answer an approval request with, as LangChain's HumanInTheLoopMiddleware names them: run the
# call, run an edited call, don't run it (the model reads why), or answer it with their own text as its result.
ApprovalDecision = Literal["approve", "edit", "reject", "respond"]
APPROVAL_DECISIONS: tuple[ApprovalDecision, ...] = ("approve", "edit", "reject", "respond")


@dataclass(frozen=True, slots=True)
class ToolMeta:
    """A registered tool: its contract with the model (name, description, params) and its limits."""

    name: str
    description: str
    # The arguments' contract: a pydantic model, or None when `json_schema` describes them instead.
    params_model: type[BaseModel] | None
    # Called with the validated arguments as keywords; sync callables run in a worker thread (but see timeout_s).
    run: Callable[..., Any]
    # The longest a call may take, retries included. None: no deadline; a sync tool then runs on its caller's own
    # thread under `invoke` (no hand-off to a gateway thread, nothing to stop it if it hangs) — for tools you trust.
    timeout_s: float | None = 10.0
    enabled: bool = True
    tags: tuple[str, ...] = ()
    # Calls of this tool allowed in flight at once (None: only the gateway-wide limit applies).
    max_concurrency: int | None = None
    # Attempts for transient failures (1 = no retry).
    max_attempts: int = 3
    # Longest result text the model gets (None: the gateway's `max_result_chars`); longer is cut, with a note.
    max_result_chars: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # Whether a person must approve each call before it runs ("always") or not ("never"); sessions and
    # Context may override it per tool name or tag. The graphs pause with LangGraph's `interrupt` to ask.
    approval: Literal["always", "never"] = "never"
    # The decisions a person may give on this tool's calls (LangChain's `allowed_decisions`).
    approval_decisions: tuple[ApprovalDecision, ...] = APPROVAL_DECISIONS
    # A JSON schema for the arguments (instead of `params_model`): sent to the model unchanged, enforced by jsonschema.
    json_schema: dict[str, Any] | None = None
    # A LangChain tool's parameters the runtime fills in (call id, state, store, ToolRuntime); not in the schema.
    injects: InjectedArgs | None = None
    # Derived once: the compiled JSON-schema validator (checking a schema per call would cost more than the call).
    validator: Any = field(init=False, repr=False, compare=False, default=None)
    # Derived once: asking inspect on every call shows up in the gateway's per-call overhead.
    is_async: bool = field(init=False, repr=False, compare=False, default=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "is_async", inspect.iscoroutinefunction(self.run))
        if (self.params_model is None) == (self.json_schema is None):
            raise ToolRegistrationError(f"tool {self.name!r}: give exactly one of params_model and json_schema")
        if self.json_schema is not None:
            object.__setattr__(self, "validator", compile_schema(self.name, self.json_schema))
        if not self.name or not self.name.replace("_", "").replace("-", "").isalnum():
            raise ToolRegistrationError(
                f"tool name {self.name!r} must be non-empty letters, digits, '_' or '-' "
                "(model providers reject other names)"
            )
        if self.timeout_s is not None and not self.timeout_s > 0:
            raise ToolRegistrationError(f"tool {self.name!r}: timeout_s must be > 0 (or None: no deadline)")
        if self.max_attempts < 1:
            raise ToolRegistrationError(f"tool {self.name!r}: max_attempts must be >= 1")
        if self.approval not in ("always", "never"):
            raise ToolRegistrationError(
                f"tool {self.name!r}: approval must be 'always' or 'never', not {self.approval!r}")
        if isinstance(self.approval_decisions, list):  # as LangChain's configs write it
            object.__setattr__(self, "approval_decisions", tuple(self.approval_decisions))
        if not self.approval_decisions or not set(self.approval_decisions) <= set(APPROVAL_DECISIONS):
            raise ToolRegistrationError(f"tool {self.name!r}: approval_decisions must be some of "
                                        f"{', '.join(APPROVAL_DECISIONS)}, not {self.approval_decisions!r}")
        if self.max_result_chars is not None and self.max_result_chars < 1:
            raise ToolRegistrationError(f"tool {self.name!r}: max_result_chars must be >= 1")

    def openai_schema(self) -> dict[str, Any]:
        """The tool in OpenAI function-calling format, as model providers expect it."""
        if self.params_model is None:
            parameters = self.json_schema
        else:  # a copy: whoever sends it may change it (strict mode, a provider's own dialect)
            parameters = copy.deepcopy(_openai_parameters(self.params_model))
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": parameters},
        }

    @classmethod
    def from_json_schema(cls, name: str, description: str, schema: dict[str, Any], run: Callable[..., Any],
                         **options: Any) -> ToolMeta:
        """A tool whose arguments a JSON schema describes (e.g. from MCP or another framework)."""
        return cls(name=name, description=description, params_model=None, run=run, json_schema=schema, **options)

    @classmethod
    def from_function(cls, fn: Callable[..., Any], *, name: str | None = None,
                      description: str | None = None, **options: Any) -> ToolMeta:
        """Build from a typed function: the schema comes from its hints, the texts from its docstring."""
        tool_name, tool_description, params_model = _contract_of(fn, name, description)
        return cls(name=tool_name, description=tool_description, params_model=params_model, run=fn, **options)

    @classmethod
    def from_langchain(cls, tool: BaseTool, **options: Any) -> ToolMeta:
        """Wrap a LangChain tool so it runs through the gateway's pipeline like any other.

        A dict `args_schema` (StructuredTool with a JSON schema, MCP adapters, our own `as_langchain_tools()`)
        is kept as a JSON schema: its root-model wrapper from `get_input_schema()` would hide the parameters.
        Injected parameters (`InjectedToolCallId`, `InjectedState`, `InjectedStore`, `ToolRuntime`) stay out of
        the model's schema (LangChain's `tool_call_schema`) and are filled in by the gateway (`langchain_adapter.py`).
        A `content_and_artifact` tool's artifact comes back beside its content (`ToolOutput`).
        """
        injects = injected_args(tool)
        id_parameter = injects.call_id if injects else None

        async def run(**kwargs: Any) -> Any:
            # LangChain fills an InjectedToolCallId parameter from the tool call's own id
            call_id = kwargs.pop(id_parameter, None) if id_parameter else None
            return in_band_outcome(tool.name, await tool.ainvoke(
                {"type": "tool_call", "name": tool.name, "args": kwargs, "id": call_id or _GATEWAY_CALL_ID}))

        description = tool.description or tool.name
        if isinstance(tool.args_schema, dict):
            return cls.from_json_schema(tool.name, description, tool.args_schema, run, **options)
        schema = tool.tool_call_schema if injects else tool.get_input_schema()
        return cls(name=tool.name, description=description, params_model=_pydantic_model(schema, tool), run=run,
                   injects=injects, **options)


# What may be registered as a tool: a `ToolMeta`, a LangChain tool, or a typed function.
AnyTool = ToolMeta | BaseTool | Callable[..., Any]
_GATEWAY_CALL_ID = "reactgraph-gateway"  # LangChain answers a tool-call input with a ToolMessage, status included


class InBandToolError(ToolError):
    """A LangChain tool reported failure in its result (a handled ToolException, a ToolMessage with status error)."""


def in_band_outcome(name: str, message: Any) -> Any:
    """The tool's content, or `InBandToolError` when LangChain marked the message as an error.

    Only LangChain's own marker counts: content that merely reads like an error is the tool's answer.
    """
    if not isinstance(message, ToolMessage):
        return message
    if message.status == "error":
        text = message.text.removeprefix(f"Tool {name} failed: ")  # a gateway's own wording, not said twice
        raise InBandToolError(text or f"{name} reported an error")
    return message.content if message.artifact is None else ToolOutput(message.content, message.artifact)


# Functions' contracts, by what they are derived from. LangChain derives a function's schema by building pydantic
# models (≈ 1.5 ms of CPU a tool): a factory called again (`builtin_tools()` for each default gateway) would pay it
# for every tool each time. Its closures are new function objects with the same code, so the key is what the
# derivation reads: the code, the signature (defaults and annotations), the docstring, the names asked for.
_CONTRACTS: dict[Hashable, tuple[str, str, type[BaseModel]]] = {}
_MAX_CONTRACTS = 512


def _contract_of(fn: Callable[..., Any], name: str | None,
                 description: str | None) -> tuple[str, str, type[BaseModel]]:
    """(name, description, arguments model) of a typed function, as LangChain's `StructuredTool` derives them."""
    key = _contract_key(fn, name, description)
    known = _CONTRACTS.get(key) if key is not None else None
    if known is not None:
        return known
    is_async = inspect.iscoroutinefunction(fn)
    try:
        structured = StructuredTool.from_function(
            func=None if is_async else fn, coroutine=fn if is_async else None, name=name,
            description=description, parse_docstring=True, error_on_invalid_docstring=False,
        )
    except (ValueError, TypeError) as exc:
        raise ToolRegistrationError(f"cannot derive a schema for {fn!r}: {exc}") from exc
    contract = (structured.name, structured.description, _pydantic_model(structured.args_schema, fn))
    if key is not None and len(_CONTRACTS) < _MAX_CONTRACTS:
        _CONTRACTS[key] = contract
    return contract


@functools.lru_cache(maxsize=1024)
def _openai_parameters(params_model: type[BaseModel]) -> dict[str, Any]:
    """The arguments' JSON schema as OpenAI's function format has it, made once per model class (≈ 1 ms: a graph
    asks for its tools' schemas when it is built, and a default gateway's tools share their classes)."""
    parameters: dict[str, Any] = convert_to_openai_tool(params_model)["function"].get("parameters", {})
    return parameters


def _contract_key(fn: Callable[..., Any], name: str | None, description: str | None) -> Hashable | None:
    """What the derivation reads of a plain function, hashable; None for anything else (or unhashable parts)."""
    code = getattr(fn, "__code__", None)
    if not inspect.isfunction(fn) or code is None:
        return None
    try:
        signature = inspect.signature(fn)
        # The defaults' types too: 1, 1.0 and True are equal, and hash alike, but are not the same schema default.
        default_types = tuple(type(parameter.default) for parameter in signature.parameters.values())
        key = (code, fn.__module__, fn.__qualname__, signature, default_types, fn.__doc__, name, description)
        hash(key)
    except (TypeError, ValueError):  # an unhashable default or annotation; a signature inspect cannot read
        return None
    return key


def _pydantic_model(schema: object, source: object) -> type[BaseModel]:
    """`schema` if it is a pydantic v2 model class: the gateway validates arguments with `model_validate`."""
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return schema
    raise ToolRegistrationError(f"cannot register {source!r}: its argument schema is not a pydantic v2 model")


def as_tool_meta(tool: AnyTool, **options: Any) -> ToolMeta:
    """A `ToolMeta` from any accepted form: a `ToolMeta`, a LangChain tool, or a typed function."""
    if isinstance(tool, ToolMeta):
        return tool
    if isinstance(tool, BaseTool):
        return ToolMeta.from_langchain(tool, **options)
    if callable(tool):
        return ToolMeta.from_function(tool, **options)
    raise ToolRegistrationError(f"cannot register {tool!r}: expected ToolMeta, a LangChain tool or a function")


# -- tools described by a JSON schema ----------------------------------------------------------------------------------

_MAX_ERRORS = 5  # a model fixing its call needs the first few problems, not all of a hostile payload's
_MAX_MESSAGE_CHARS = 200  # jsonschema quotes the offending value, which may be huge


def compile_schema(name: str, schema: object) -> Validator:
    """A validator for `schema` (its `$schema` dialect, else Draft 2020-12); one line if the schema is invalid."""
    if not isinstance(schema, Mapping):
        raise ToolRegistrationError(f"tool {name!r}: the JSON schema must be an object, got {type(schema).__name__}")
    if schema.get("type", "object") != "object":
        raise ToolRegistrationError(f"tool {name!r}: the JSON schema must describe an object (tool arguments), "
                                    f"got type {schema.get('type')!r}")
    cls = validators.validator_for(schema, default=Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.path) or "(top level)"
        raise ToolRegistrationError(f"tool {name!r}: invalid JSON schema at {where}: {_short(exc.message)}") from None
    return cls(dict(schema))


def field_errors(validator: Validator, args: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The arguments' problems as `{"loc", "msg"}` (the shape pydantic errors are reported in); empty if valid."""
    try:
        errors = sorted(validator.iter_errors(args), key=lambda e: list(map(str, e.absolute_path)))
    except RecursionError:  # arguments nested past what the validator can walk
        return [{"loc": [], "msg": "arguments are nested too deeply"}]
    return [{"loc": list(e.absolute_path), "msg": _short(e.message)} for e in errors[:_MAX_ERRORS]]


def describe_field_errors(errors: list[dict[str, Any]]) -> str:
    """`field: message; ...`, the same wording `untrusted.invalid_args` uses for pydantic errors."""
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in errors)


def _short(text: str) -> str:
    return text if len(text) <= _MAX_MESSAGE_CHARS else text[:_MAX_MESSAGE_CHARS] + "…"
