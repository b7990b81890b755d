"""Memory for the agents: checkpointers (plain-Redis `RedisSaver` / `AsyncRedisSaver`), the long-term
`RedisStore`, and session memory (`SessionMemory`: a kept window plus a running summary)."""

from memory.redis_checkpoint import (
    AsyncRedisSaver,
    CheckpointStoreUnavailable,
    InvalidRedisURL,
    RedisSaver,
)
from memory.redis_store import RedisStore
from memory.session_memory import (
    ConversationSummary,
    Fold,
    SessionMemory,
    fallback_summary,
    summary_from_messages,
    summary_message,
    summary_prompt,
)

__all__ = ["AsyncRedisSaver", "CheckpointStoreUnavailable", "InvalidRedisURL", "RedisSaver",
           "ConversationSummary", "Fold", "RedisStore", "SessionMemory", "fallback_summary",
           "summary_from_messages", "summary_message", "summary_prompt"]
