"""Memory for the agents: checkpointers (plain-Redis `RedisSaver` / `AsyncRedisSaver`), the long-term
`RedisStore`, and session memory (`SessionMemory`: a kept window plus a running summary)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from reactgraph._lazy import lazy_attributes

if TYPE_CHECKING:
    from reactgraph.memory.redis_checkpoint import (
        AllowListSerializer,
        AsyncRedisSaver,
        CheckpointStoreUnavailable,
        InvalidRedisURL,
        RedisSaver,
        RefusedPayload,
        UnreadableCheckpoint,
    )
    from reactgraph.memory.redis_store import RedisStore
    from reactgraph.memory.session_memory import (
        ConversationSummary,
        Fold,
        SessionMemory,
        fallback_summary,
        summary_from_messages,
        summary_prompt,
    )

_EXPORTS = {
    "AllowListSerializer": "reactgraph.memory.redis_checkpoint",
    "AsyncRedisSaver": "reactgraph.memory.redis_checkpoint",
    "CheckpointStoreUnavailable": "reactgraph.memory.redis_checkpoint",
    "InvalidRedisURL": "reactgraph.memory.redis_checkpoint",
    "RedisSaver": "reactgraph.memory.redis_checkpoint",
    "RefusedPayload": "reactgraph.memory.redis_checkpoint",
    "UnreadableCheckpoint": "reactgraph.memory.redis_checkpoint",
    "RedisStore": "reactgraph.memory.redis_store",
    "ConversationSummary": "reactgraph.memory.session_memory",
    "Fold": "reactgraph.memory.session_memory",
    "SessionMemory": "reactgraph.memory.session_memory",
    "fallback_summary": "reactgraph.memory.session_memory",
    "summary_from_messages": "reactgraph.memory.session_memory",
    "summary_prompt": "reactgraph.memory.session_memory",
}
__all__ = [*_EXPORTS]
__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS)
