"""LangGraph checkpointers on plain Redis 6+ / Valkey: strings, hashes and sorted sets only, no modules.

`RedisSaver` (on redis-py's sync client) and `AsyncRedisSaver` (on redis.asyncio) each serve sync and async
callers and pass LangGraph's conformance suite, optional capabilities included (copy_thread,
delete_for_runs, prune). Every operation that a graph step pays
for is one round trip: `put`, `put_writes` and `get_tuple` are each one EVALSHA of a Lua script
(`scripts.py`), atomic on the server; the script's source is sent only when the server answers NOSCRIPT.
The key layout is in `layout.py`.

Channel values are stored like LangGraph's Postgres saver, as per-channel versioned blobs: a put writes
only the channels whose version moved, and a checkpoint lists the (channel, version) blobs it uses.
Measured on this project's machine (benchmarks/checkpoint.py, plus the same graph with every channel
re-sent on every put to stand in for inline storage): on a ReAct state the two tie, because the
messages channel changes every step either way; with 60 retrieved Documents in a channel written once,
blobs were 11% faster per episode (23.3 vs 26.1 ms) and store that channel once instead of once per
checkpoint. So: blobs.

That layout costs a ReAct session ~80 KB of Redis a turn, mostly per-key overhead and what each checkpoint
repeats of its parent. So the newest checkpoints stay on their own, in that layout, and once more than
`page_size` (32) of a namespace are, a `put` seals all but the newest into one compressed page (`pages.py`):
500 turns take 1.66 MB instead of 39.92 MB (benchmarks/session_growth.py), reading and writing the latest
state cost what they did, and sessions stored before pages read as they are and are sealed as they go on.

Decoding trusts nothing in the Redis: values are decoded by `AllowListSerializer` (serde.py), which builds
only LangGraph's and LangChain's own types and refuses the rest, and a checkpoint that cannot be read is an
`UnreadableCheckpoint` naming its key (reading.py), which `delete_checkpoint` can remove.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reactgraph._lazy import lazy_attributes

if TYPE_CHECKING:
    from reactgraph.memory.redis_checkpoint.reading import UnreadableCheckpoint
    from reactgraph.memory.redis_checkpoint.savers import AsyncRedisSaver, RedisSaver
    from reactgraph.memory.redis_checkpoint.serde import AllowListSerializer, RefusedPayload
    from reactgraph.memory.redis_checkpoint.settings import (
        CheckpointStoreUnavailable,
        InvalidRedisSetting,
        InvalidRedisURL,
        RedisPoolExhausted,
    )

# Lazy, so that the error types (and `memory.checkpointer`) can be imported without loading redis-py.
_EXPORTS = {
    "AllowListSerializer": "reactgraph.memory.redis_checkpoint.serde",
    "AsyncRedisSaver": "reactgraph.memory.redis_checkpoint.savers",
    "CheckpointStoreUnavailable": "reactgraph.memory.redis_checkpoint.settings",
    "InvalidRedisSetting": "reactgraph.memory.redis_checkpoint.settings",
    "InvalidRedisURL": "reactgraph.memory.redis_checkpoint.settings",
    "RedisPoolExhausted": "reactgraph.memory.redis_checkpoint.settings",
    "RedisSaver": "reactgraph.memory.redis_checkpoint.savers",
    "RefusedPayload": "reactgraph.memory.redis_checkpoint.serde",
    "UnreadableCheckpoint": "reactgraph.memory.redis_checkpoint.reading",
}
__all__ = [*_EXPORTS]
__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS)
