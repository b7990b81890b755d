"""Memory for the agents: checkpointers (plain-Redis `RedisSaver` / `AsyncRedisSaver`) and stores."""

from memory.redis_checkpoint import AsyncRedisSaver, CheckpointStoreUnavailable, InvalidRedisURL, RedisSaver

__all__ = ["AsyncRedisSaver", "CheckpointStoreUnavailable", "InvalidRedisURL", "RedisSaver"]
