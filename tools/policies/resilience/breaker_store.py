"""Where circuit-breaker state lives: in this process, or in Redis so several workers share it."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from reactgraph.tools.policies.resilience.breaker_state import BreakerSnapshot, BreakerState

T = TypeVar("T")


class BreakerStore(Protocol):
    """Atomic read-modify-write of one breaker's snapshot, keyed by tool name."""

    async def read(self, name: str) -> BreakerSnapshot: ...

    async def update(self, name: str, change: Callable[[BreakerSnapshot], tuple[T, BreakerSnapshot]]) -> T: ...


class MemoryBreakerStore:
    """Snapshots in a dict. Updates run on the event loop without awaiting, so they are atomic."""

    def __init__(self) -> None:
        self._snapshots: dict[str, BreakerSnapshot] = {}

    async def read(self, name: str) -> BreakerSnapshot:
        return self._snapshots.get(name) or BreakerSnapshot()

    async def update(self, name: str, change: Callable[[BreakerSnapshot], tuple[T, BreakerSnapshot]]) -> T:
        value, new = change(self._snapshots.get(name) or BreakerSnapshot())
        self._snapshots[name] = new
        return value


class RedisBreakerStore:
    """Snapshots as JSON strings in Redis, changed with WATCH/MULTI so concurrent workers never lose a transition."""

    def __init__(self, client: Any, prefix: str = "reactgraph:breaker:") -> None:
        # `client` is a `redis.asyncio.Redis`; breaker state must be shared, so the clock must be wall time.
        self.client = client
        self.prefix = prefix

    @classmethod
    def from_url(cls, url: str, prefix: str = "reactgraph:breaker:") -> RedisBreakerStore:
        # imported lazily: only shared-state users need a client. The savers' kind of client: a bounded pool, a
        # read timeout, and a bad URL refused in one line.
        from reactgraph.memory.redis_checkpoint.limits import PoolLimits
        from reactgraph.memory.redis_checkpoint.pool import new_client

        return cls(new_client(url, {}, PoolLimits.resolve(None, None), True), prefix)

    async def read(self, name: str) -> BreakerSnapshot:
        return self._decode(await self.client.get(self.prefix + name))

    async def update(self, name: str, change: Callable[[BreakerSnapshot], tuple[T, BreakerSnapshot]]) -> T:
        from redis.exceptions import WatchError

        key = self.prefix + name
        async with self.client.pipeline(transaction=True) as pipe:
            while True:
                try:
                    await pipe.watch(key)
                    current = self._decode(await pipe.get(key))
                    value, new = change(current)
                    if new != current:
                        pipe.multi()
                        pipe.set(key, self._encode(new))
                        await pipe.execute()
                    else:
                        await pipe.unwatch()
                    return value
                except WatchError:
                    continue

    @staticmethod
    def _encode(snapshot: BreakerSnapshot) -> str:
        return json.dumps({"state": snapshot.state.value, "consecutive_failures": snapshot.consecutive_failures,
                           "opened_at": snapshot.opened_at, "probe_started_at": snapshot.probe_started_at})

    @staticmethod
    def _decode(raw: bytes | str | None) -> BreakerSnapshot:
        if not raw:
            return BreakerSnapshot()
        data = json.loads(raw)
        return BreakerSnapshot(BreakerState(data["state"]), data["consecutive_failures"],
                               data["opened_at"], data["probe_started_at"])
