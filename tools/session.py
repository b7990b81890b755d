"""Who is calling: the session id used for logs and the per-session tool permissions."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

ApprovalSetting = Literal["always", "never"]

SCOPE_PREFIX = "mcp-config:"  # the tag prefix of tools added for one MCP config file (see ToolGateway.mcp_config_scope)


@dataclass(frozen=True, slots=True)
class ToolSession:
    """A caller of the gateway. `allow`/`deny` hold tool names or tags; deny wins over allow."""

    id: str = "default"
    # None allows every tool; an empty set allows none.
    allow: frozenset[str] | None = None
    deny: frozenset[str] = frozenset()
    # Approval overrides by tool name or tag: ("http_get", "never"), ("mcp", "always");
    # see tools/approval.py.
    approval: tuple[tuple[str, ApprovalSetting], ...] = ()
    # Scope tags (`mcp-config:<file>`) of the MCP config files this session's runs name (Context.mcp_config): a
    # tool carrying such a tag is visible only to sessions naming it.
    mcp_scopes: frozenset[str] = frozenset()

    def permits(self, name: str, tags: tuple[str, ...] = ()) -> bool:
        labels = {name, *tags}
        if labels & self.deny:
            return False
        if any(tag.startswith(SCOPE_PREFIX) and tag not in self.mcp_scopes for tag in tags):
            return False
        return self.allow is None or bool(labels & self.allow)

    @classmethod
    def of(cls, id: str = "default", allow: Iterable[str] | None = None, deny: Iterable[str] | None = (),
           approval: Mapping[str, ApprovalSetting] | None = None, mcp_scopes: Iterable[str] = ()) -> ToolSession:
        """Convenience constructor taking any iterables (CLI options, Context fields)."""
        return cls(id=id, allow=None if allow is None else frozenset(allow), deny=frozenset(deny or ()),
                   approval=tuple(sorted((approval or {}).items())), mcp_scopes=frozenset(mcp_scopes))
