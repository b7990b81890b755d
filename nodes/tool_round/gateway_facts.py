"""How the gateway ended a call, kept on the result's ToolMessage (`response_metadata["gateway"]`) so observe can
record the step without re-parsing the observation; the message's `artifact` stays the tool's own."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import ToolMessage


def gateway_facts(status: str, latency_ms: float, attempts: int) -> dict[str, Any]:
    """How the gateway ended a call, as a ToolMessage's `response_metadata` carries it (`facts_of` reads it)."""
    return {"gateway": {"status": status, "latency_ms": latency_ms, "attempts": attempts}}


def facts_of(message: ToolMessage) -> dict[str, Any]:
    """The gateway's facts of a result message ({} for one the gateway did not answer)."""
    facts = (message.response_metadata or {}).get("gateway")
    return facts if isinstance(facts, dict) else {}
