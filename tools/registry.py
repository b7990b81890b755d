"""The set of registered tools, and which of them a given session may see."""

from __future__ import annotations

from collections.abc import Iterator

from reactgraph.tools.errors import ToolRegistrationError
from reactgraph.tools.meta import ToolMeta
from reactgraph.tools.session import ToolSession


class ToolRegistry:
    """Tools by name, in registration order; a name can be registered once."""

    def __init__(self) -> None:
        self._tools: dict[str, ToolMeta] = {}

    def add(self, meta: ToolMeta) -> None:
        if meta.name in self._tools:
            raise ToolRegistrationError(f"a tool named {meta.name!r} is already registered")
        self._tools[meta.name] = meta

    def get(self, name: str) -> ToolMeta | None:
        return self._tools.get(name) if isinstance(name, str) else None

    def __iter__(self) -> Iterator[ToolMeta]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def available(self, session: ToolSession) -> list[ToolMeta]:
        """Enabled tools this session is permitted to call."""
        return [m for m in self._tools.values() if m.enabled and session.permits(m.name, m.tags)]

    def available_names(self, session: ToolSession) -> list[str]:
        return [m.name for m in self.available(session)]
