"""LangGraph's long-term store (`BaseStore`) on plain Redis 6+ / Valkey: strings and sorted sets, no modules.

`RedisStore` keeps namespaced JSON items shared across threads (sessions), e.g. a user's Q&A log or
reflection lessons: get, put, delete, search by namespace prefix with value filters (newest first),
list namespaces, per-item TTLs. No semantic (vector) search. Key layout in `layout.py`, scripts in
`scripts.py`; failures are the checkpointer's `InvalidRedisURL` / `CheckpointStoreUnavailable`.
"""

from reactgraph.memory.redis_store.store import RedisStore, UnreadableItem

__all__ = ["RedisStore", "UnreadableItem"]
