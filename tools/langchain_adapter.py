"""Gateway tools as LangChain `BaseTool`s, so `create_agent` or any LangChain runner still goes through the pipeline."""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.tools import BaseTool
from pydantic import ConfigDict

from reactgraph.tools.meta import ToolMeta
from reactgraph.tools.session import ToolSession


class GatewayTool(BaseTool):
    """A LangChain tool whose every call is `gateway.execute`; failures come back as text, never raised."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    gateway: Any
    session: ToolSession

    @classmethod
    def wrap(cls, gateway: Any, meta: ToolMeta, session: ToolSession) -> GatewayTool:
        # A JSON-schema dict (not the model): LangChain then passes arguments through unvalidated, so bad ones
        # reach the gateway and come back as its `invalid_args` text instead of a raised ValidationError.
        return cls(name=meta.name, description=meta.description,
                   args_schema=meta.openai_schema()["function"]["parameters"], gateway=gateway, session=session)

    async def _arun(self, *args: Any, **kwargs: Any) -> str:
        kwargs.pop("run_manager", None)
        result = await self.gateway.execute({"name": self.name, "args": kwargs, "id": ""}, self.session)
        return result.content

    def _run(self, *args: Any, **kwargs: Any) -> str:
        kwargs.pop("run_manager", None)
        return asyncio.run(self._arun(**kwargs))
