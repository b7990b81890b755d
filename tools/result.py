"""What a tool call returns to the agent: a status, an observation and its cost."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any


class ToolStatus(StrEnum):
    """Outcome of one tool call; every value is a distinct way a call can end."""

    OK = "ok"
    UNKNOWN_TOOL = "unknown_tool"
    DENIED = "denied"
    INVALID_ARGS = "invalid_args"
    CIRCUIT_OPEN = "circuit_open"
    RATE_LIMITED = "rate_limited"
    TIMEOUT = "timeout"
    # The tool asks a person to approve each call, and this one came without an approval: it was not run.
    NEEDS_APPROVAL = "needs_approval"
    ERROR = "error"

    @property
    def counts_as_failure(self) -> bool:
        """Whether the circuit breaker should count this outcome against the tool."""
        return self in _FAILURES


_FAILURES = frozenset({ToolStatus.ERROR, ToolStatus.TIMEOUT})


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """What a tool returned in two parts (LangChain's `content_and_artifact`): `content` for the model, `artifact`
    for the program (raw data, ids, a dataframe), kept on the ToolMessage and never shown to the model."""

    content: Any
    artifact: Any


@dataclass(slots=True)
class ToolResult:
    """The normalised outcome of one call: `content` is what the model reads next."""

    name: str
    call_id: str
    status: ToolStatus
    content: str
    latency_ms: float = 0.0
    attempts: int = 0
    # Raw value returned by the tool (ok calls only); `content` is its rendering for the model.
    value: Any = None
    # Machine-readable facts behind `content` (e.g. field errors, retry time) for logs and tests.
    detail: dict[str, Any] = field(default_factory=dict)
    # The tool's artifact (`ToolOutput`), for the ToolMessage: not for the model, nor for logs.
    artifact: Any = None

    @property
    def ok(self) -> bool:
        return self.status is ToolStatus.OK

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["status"] = self.status.value
        data.pop("value")
        data.pop("artifact")
        return data
