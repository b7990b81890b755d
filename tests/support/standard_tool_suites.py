"""LangChain's standard tool tests (langchain-tests' ToolsUnitTests and ToolsIntegrationTests), one class pair per
tool, for a test module to hold: `standard_tool_suites(globals(), tools, examples)`."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from langchain_core.tools import BaseTool
from langchain_tests.integration_tests import ToolsIntegrationTests
from langchain_tests.unit_tests import ToolsUnitTests


def standard_tool_suites(namespace: dict[str, Any], tools: Callable[[], dict[str, BaseTool]],
                         examples: dict[str, Callable[[], dict[str, Any]]], *,
                         unit_only: Iterable[str] = ()) -> None:
    """Add `Test<Name>Unit` and `Test<Name>Integration` classes to `namespace` for each tool named in `examples`.
    `tools()` gives the tools by name (read lazily, once a suite runs); the integration suite also checks that
    the example call succeeds, and is left out for the tools in `unit_only` (those that cannot run on their own)."""

    class Standard:
        name = ""

        @property
        def tool_constructor(self) -> BaseTool:
            return tools()[self.name]

        @property
        def tool_invoke_params_example(self) -> dict[str, Any]:
            return examples[self.name]()

    class Succeeds(Standard):
        def test_the_example_call_succeeds(self, tool: BaseTool) -> None:
            message = tool.invoke({"name": tool.name, "args": self.tool_invoke_params_example, "id": "x",
                                   "type": "tool_call"})
            assert message.status == "success", message.text

    skipped = set(unit_only)
    for name in examples:
        title = "".join(part.title() for part in name.split("_"))
        namespace[f"Test{title}Unit"] = type(f"Test{title}Unit", (Standard, ToolsUnitTests), {"name": name})
        if name not in skipped:
            namespace[f"Test{title}Integration"] = type(f"Test{title}Integration", (Succeeds, ToolsIntegrationTests),
                                                        {"name": name})
