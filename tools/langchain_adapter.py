"""Gateway tools as LangChain `BaseTool`s, so `create_agent` or any LangChain runner still goes through the pipeline."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from langchain_core.tools import BaseTool, ToolException
from langchain_core.utils.pydantic import TypeBaseModel
from pydantic import ConfigDict, create_model

from reactgraph.tools.call import ToolResult, ToolSession
from reactgraph.tools.injection import ToolInjection
from reactgraph.tools.meta import ToolMeta
from reactgraph.tools.threads import run_sync


class GatewayTool(BaseTool):
    """A LangChain tool whose every call is `gateway.execute`; failures come back as text, never raised.

    A non-ok result is raised as a `ToolException` that the tool handles itself (`handle_tool_error`): LangChain
    then returns its text, as a `ToolMessage` with `status="error"` when called with a tool call.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)
    gateway: Any
    session: ToolSession
    # The host agent's HumanInTheLoopMiddleware (anything with `interrupt_on`), or None: see `host_approved`.
    approved_by: Any = None
    # Sees every call's full result (its status, which the text a runner gets does not carry): e.g. the evals.
    on_result: Callable[[ToolResult], None] | None = None

    @classmethod
    def wrap(cls, gateway: Any, meta: ToolMeta, session: ToolSession, approved_by: Any = None,
             on_result: Callable[[ToolResult], None] | None = None) -> GatewayTool:
        # A JSON-schema dict (not the model): LangChain then passes arguments through unvalidated, so bad ones
        # reach the gateway and come back as its `invalid_args` text instead of a raised ValidationError.
        return cls(name=meta.name, description=meta.description,
                   args_schema=meta.openai_schema()["function"]["parameters"], gateway=gateway, session=session,
                   handle_tool_error=True, approved_by=approved_by, on_result=on_result)

    def host_approved(self) -> bool:
        """Whether the host's HITL middleware asked a person about this tool's calls before they get here: it
        gates this tool's name in its `interrupt_on`. Its approve and edit then reach the tool (reject and respond
        never do), so the gateway takes them as the approval; its `when` predicate, if any, is the host's choice of
        which calls to ask about."""
        gated = getattr(self.approved_by, "interrupt_on", None)
        return isinstance(gated, Mapping) and self.name in gated

    def get_input_schema(self, config: Any = None) -> TypeBaseModel:
        """The input as LangGraph's `ToolNode` reads it to inject arguments: a `runtime` it fills in with its
        `ToolRuntime`, so a wrapped tool's injected arguments (call id, state, store, context, config, stream
        writer) get the host graph's. The model never sees it: its schema is `tool_call_schema`, the JSON schema.
        A tool whose own arguments include one called `runtime` keeps it, and gets no host runtime."""
        properties = self.args_schema.get("properties", {}) if isinstance(self.args_schema, dict) else {}
        if "runtime" in properties:
            return super().get_input_schema(config)
        from langgraph.prebuilt import ToolRuntime

        return create_model(f"{self.name}_input", __config__=ConfigDict(arbitrary_types_allowed=True, extra="allow"),
                            runtime=(ToolRuntime | None, None))

    async def _arun(self, *args: Any, **kwargs: Any) -> str:
        kwargs.pop("run_manager", None)
        injection, call_id = _host_runtime(kwargs)
        result = await self.gateway.execute({"name": self.name, "args": kwargs, "id": call_id}, self.session,
                                            approved=self.host_approved(), injection=injection)
        if self.on_result is not None:
            self.on_result(result)
        if not result.ok:
            raise ToolException(result.content)
        return result.content

    def _run(self, *args: Any, **kwargs: Any) -> str:
        # The shared bridge, not asyncio.run: this may be called from code inside a running loop (Jupyter, FastAPI).
        return run_sync(self._arun(*args, **kwargs))


def _host_runtime(kwargs: dict[str, Any]) -> tuple[ToolInjection | None, str]:
    """Take the `ToolRuntime` a host `ToolNode` injected (see `get_input_schema`) out of the arguments: what it
    offers the wrapped tool's injected arguments, and the call's id (empty when called outside a tool node)."""
    from langgraph.prebuilt import ToolRuntime

    runtime = kwargs.get("runtime")
    if not isinstance(runtime, ToolRuntime):  # none given, or the tool's own `runtime` argument: it stays
        return None, ""
    del kwargs["runtime"]
    state = runtime.state if isinstance(runtime.state, Mapping) else None
    injection = ToolInjection(state=state, context=runtime.context, config=runtime.config, store=runtime.store,
                              stream_writer=runtime.stream_writer)
    return injection, str(runtime.tool_call_id or "")
