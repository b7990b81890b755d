"""What the commands share: option types and help texts, the one-line user error, and the builders of a run's
context, tools and store. Importing this module stays cheap: each builder imports its layer when called."""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from reactgraph.memory.checkpointer import OpenedCheckpointer
    from reactgraph.nodes.shared.context import Context
    from reactgraph.tools import ToolGateway


class UserError(Exception):
    """A problem the user can fix; shown as one line, without a traceback."""


class Reflection(StrEnum):
    """How the agent reflects after each observation (`Context.reflection`)."""

    llm = "llm"
    rules = "rules"
    off = "off"


class Protocol(StrEnum):
    """How the model calls tools (`Context.protocol`)."""

    tools = "tools"
    text = "text"


TOOLS_HELP = ("Extra tools as module:attribute (repeatable; default: $REACTGRAPH_TOOLS); they replace "
              "built-ins of the same name.")
STORE_HELP = ("Where sessions are kept: redis://host:port/db, rediss://…, unix:///path.sock, memory, "
              "sqlite:///path (default: $REDIS_URL, else the embedded Redis).")
REFLECTION_HELP = "After each observation: ask the model (llm), apply fixed rules (rules), or skip it (off)."
PROTOCOL_HELP = "Tool calls as the provider's tool-calling API (tools) or as text in the reply (text)."


def store_errors() -> tuple[type[Exception], ...]:
    """The store's failures a user can fix, imported only by the commands that open a store."""
    from reactgraph.memory.checkpointer import CheckpointerConfigError
    from reactgraph.memory.embedded_redis import EmbeddedRedisError
    from reactgraph.memory.redis_checkpoint import CheckpointStoreUnavailable, InvalidRedisSetting, InvalidRedisURL

    return CheckpointStoreUnavailable, InvalidRedisURL, InvalidRedisSetting, CheckpointerConfigError, EmbeddedRedisError


def is_user_error(exc: BaseException) -> bool:
    """A `UserError`, or a model configuration error (only possible once the model loader was imported)."""
    if isinstance(exc, UserError):
        return True
    loader = sys.modules.get("reactgraph.models.loader")
    return loader is not None and isinstance(exc, loader.ModelConfigError)


def model_label(spec: str) -> str:
    from reactgraph.models.loader import parse_spec

    provider, name = parse_spec(spec)
    return "offline (scripted offline model, not an LLM)" if provider == "offline" else f"{provider}:{name}"


def build_context(model: str | None, max_iterations: int, reflection: Reflection | str, protocol: Protocol | str,
                  allow: list[str], deny: list[str]) -> Context:
    from reactgraph.models.loader import parse_spec
    from reactgraph.nodes.shared.context import Context

    chosen: dict[str, Any] = {"model": model} if model else {}  # else Context's default: $REACTGRAPH_MODEL
    try:
        context = Context(max_iterations=max_iterations, reflection=Reflection(reflection).value,
                          protocol=Protocol(protocol).value, allowed_tools=allow or None, denied_tools=tuple(deny),
                          **chosen)
        parse_spec(context.model)
    except (ValueError, TypeError) as exc:
        raise UserError(str(exc)) from exc
    return context


def gateway_with(tool_specs: list[str], rag_index: Path | None = None) -> ToolGateway:
    from reactgraph.tools import ToolRegistrationError, default_gateway
    from reactgraph.tools.plugins import load_tools

    try:
        return default_gateway(extra_tools=load_tools(tool_specs or None), rag_index=rag_index)
    except ToolRegistrationError as exc:
        raise UserError(str(exc)) from exc


def open_store(store: str | None) -> OpenedCheckpointer:
    from reactgraph.memory.checkpointer import open_checkpointer

    try:
        return open_checkpointer(store)
    except store_errors() as exc:
        raise UserError(str(exc)) from exc


def long_term_store(opened: OpenedCheckpointer) -> Any:
    """The Q&A log and lessons live beside the checkpoints: in the same Redis (and its connection pool, which
    `from_url` on the saver's URL shares), else in this process."""
    if opened.redis_url:
        from reactgraph.memory import RedisStore
        return RedisStore.from_url(opened.redis_url)
    from langgraph.store.memory import InMemoryStore
    return InMemoryStore()
