"""The two savers, `RedisSaver` (redis-py's sync client) and `AsyncRedisSaver` (redis.asyncio), over one API.

Every `BaseCheckpointSaver` method, sync and async, written once over two primitives: `_batch` and `_abatch`.

`RedisSaver` sends batches on its thread and hands async callers' batches to worker threads;
`AsyncRedisSaver` sends them on its event loop and takes other threads' sync calls onto that loop. Either
saver so serves `invoke` and `ainvoke` alike, as LangGraph's Postgres savers do, with the logic (the
commands and plans of `core.py`) in one place.

`RedisSaver` serves `invoke`/`stream`/`get_state` on the caller's thread and `ainvoke`/`astream`/`aget_state` too:
an async call's round trip runs on one of the wire's worker threads (at most one per connection), so any
event loop can use it and none is blocked by it.

`AsyncRedisSaver` serves `ainvoke`/`astream`/`aget_state` on its event loop, and sync calls (`get_state`, `invoke`) made
from other threads while that loop runs, by running them on the loop (as LangGraph's async Postgres and
SQLite savers do). A sync call on the loop's own thread would wait for the loop it blocks, so it is refused.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Generator, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import redis
import redis.asyncio
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from reactgraph.memory.redis_checkpoint.core import Plan, RedisSaverCore, ThreadUsage, copy_thread_plan, usage_plan
from reactgraph.memory.redis_checkpoint.pool import SHARED, Shared, WiredClient
from reactgraph.memory.redis_checkpoint.settings import PoolLimits, client_url, redact
from reactgraph.memory.redis_checkpoint.wire import AsyncWire, Command, wire_of

T = TypeVar("T")


class BatchSaver(RedisSaverCore):
    """The checkpointer API over `_batch` (blocking) and `_abatch` (awaitable); subclasses supply those two."""

    def _batch(self, commands: list[Command]) -> list[Any]:
        raise NotImplementedError

    async def _abatch(self, commands: list[Command]) -> list[Any]:
        raise NotImplementedError

    # --- sync ----------------------------------------------------------------------------------------

    def put(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
            new_versions: ChannelVersions) -> RunnableConfig:
        command, saved = self._put_command(config, checkpoint, metadata, new_versions)
        self._batch([command])
        return saved

    def put_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
                   task_path: str = "") -> None:
        command = self._put_writes_command(config, writes, task_id, task_path)
        if command is not None:
            self._batch([command])

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        found = list(self._drive(self._get_plan(config)))
        return found[0] if found else None

    def get_delta_channel_history(self, *, config: RunnableConfig,
                                  channels: Sequence[str]) -> Mapping[str, DeltaChannelHistory]:
        """LangGraph's DeltaChannel rebuild: each channel's writes since its nearest stored value, and that value,
        walked on the server in one round trip (the base class walks one `get_tuple` per ancestor)."""
        return self._run(self._delta_history_plan(config, channels))

    def list(self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
             before: RunnableConfig | None = None, limit: int | None = None) -> Iterator[CheckpointTuple]:
        return self._drive(self._list_plan(config, filter, before, limit))

    def delete_thread(self, thread_id: str) -> None:
        self._batch([self._delete_thread_command(thread_id)])

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        for _ in self._drive(self._delete_for_runs_plan(run_ids)):
            pass

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        for _ in self._drive(copy_thread_plan(self, source_thread_id, target_thread_id)):
            pass

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest", keep: int = 1,
              channels: Mapping[str, Any] | None = None) -> None:
        """LangGraph's prune; `keep` is how many checkpoints per namespace `keep_latest` keeps (default 1).
        `channels`: the graph's (`graph.channels`), so that the oldest kept checkpoint stores its delta channels'
        whole values and the writes they were rebuilt from can go too (without: those ancestors stay)."""
        for _ in self._drive(self._prune_plan(thread_ids, strategy, keep, channels)):
            pass

    def usage(self, thread_ids: Sequence[str] | None = None) -> tuple[ThreadUsage, ...]:
        """Checkpoints, bytes and last write of each thread (every thread under the prefix if None); no TTL restarts."""
        return tuple(self._drive(usage_plan(self, thread_ids)))  # type: ignore[arg-type]

    def thread_ids(self) -> Sequence[str]:
        """Every thread that has checkpoints under this prefix, sorted (a SCAN: for admin use, not a hot path)."""
        return [str(t) for t in self._drive(self._thread_ids_plan())]

    def checkpoint_ids(self, config: RunnableConfig, limit: int = 50, *, oldest_first: bool = False
                       ) -> Sequence[str]:
        """The ids in the thread's index, newest first (or oldest first), readable or not (`list` skips the
        unreadable ones)."""
        command = self._ids_command(config, limit, oldest_first)
        return [i.decode(errors="replace") for i in self._batch([command])[0]]

    def delete_checkpoint(self, config: RunnableConfig) -> bool:
        """Remove the checkpoint `config` names (readable or not) and its writes; False if there was none."""
        return bool(self._batch([self._drop_command(config)])[0])

    def _thread_ids_plan(self) -> Plan:
        yield from (yield from self._threads_plan())  # the listing's commands, then each id as a result

    def _run(self, plan: Generator[Any, Any, T]) -> T:
        """Drive a plan that only sends commands, to its return value."""
        reply = None
        while True:
            try:
                reply = self._batch(plan.send(reply))
            except StopIteration as done:
                return done.value

    async def _arun(self, plan: Generator[Any, Any, T]) -> T:
        reply = None
        while True:
            try:
                step = plan.send(reply)
            except StopIteration as done:
                return done.value
            reply = await self._abatch(step)

    def _drive(self, plan: Plan) -> Iterator[CheckpointTuple]:
        reply = None
        while True:
            try:
                step = plan.send(reply)
            except StopIteration:
                return
            if isinstance(step, list):
                reply = self._batch(step)
            else:
                reply = None
                yield step

    # --- async ---------------------------------------------------------------------------------------

    async def aput(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
                   new_versions: ChannelVersions) -> RunnableConfig:
        command, saved = self._put_command(config, checkpoint, metadata, new_versions)
        await self._abatch([command])
        return saved

    async def aput_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
                          task_path: str = "") -> None:
        command = self._put_writes_command(config, writes, task_id, task_path)
        if command is not None:
            await self._abatch([command])

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        found = [tup async for tup in self._adrive(self._get_plan(config))]
        return found[0] if found else None

    async def aget_delta_channel_history(self, *, config: RunnableConfig,
                                         channels: Sequence[str]) -> Mapping[str, DeltaChannelHistory]:
        """`get_delta_channel_history` for async callers."""
        return await self._arun(self._delta_history_plan(config, channels))

    async def alist(self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
                    before: RunnableConfig | None = None, limit: int | None = None
                    ) -> AsyncIterator[CheckpointTuple]:
        async for tup in self._adrive(self._list_plan(config, filter, before, limit)):
            yield tup

    async def adelete_thread(self, thread_id: str) -> None:
        await self._abatch([self._delete_thread_command(thread_id)])

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        async for _ in self._adrive(self._delete_for_runs_plan(run_ids)):
            pass

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        async for _ in self._adrive(copy_thread_plan(self, source_thread_id, target_thread_id)):
            pass

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest", keep: int = 1,
                     channels: Mapping[str, Any] | None = None) -> None:
        """`prune` for async callers."""
        async for _ in self._adrive(self._prune_plan(thread_ids, strategy, keep, channels)):
            pass

    async def ausage(self, thread_ids: Sequence[str] | None = None) -> tuple[ThreadUsage, ...]:
        """Checkpoints, bytes and last write of each thread (every thread under the prefix if None); no TTL restarts."""
        return tuple([u async for u in self._adrive(usage_plan(self, thread_ids))])  # type: ignore[misc]

    async def athread_ids(self) -> Sequence[str]:
        """Every thread that has checkpoints under this prefix, sorted (a SCAN: for admin use, not a hot path)."""
        return [str(t) async for t in self._adrive(self._thread_ids_plan())]

    async def acheckpoint_ids(self, config: RunnableConfig, limit: int = 50, *, oldest_first: bool = False
                              ) -> Sequence[str]:
        """The ids in the thread's index, newest first (or oldest first), readable or not (`alist` skips the
        unreadable ones)."""
        command = self._ids_command(config, limit, oldest_first)
        return [i.decode(errors="replace") for i in (await self._abatch([command]))[0]]

    async def adelete_checkpoint(self, config: RunnableConfig) -> bool:
        """Remove the checkpoint `config` names (readable or not) and its writes; False if there was none."""
        return bool((await self._abatch([self._drop_command(config)]))[0])

    async def _adrive(self, plan: Plan) -> AsyncIterator[CheckpointTuple]:
        reply = None
        while True:
            try:
                step = plan.send(reply)
            except StopIteration:
                return
            if isinstance(step, list):
                reply = await self._abatch(step)
            else:
                reply = None
                yield step


class RedisSaver(WiredClient, BatchSaver):
    """Stores LangGraph checkpoints in plain Redis; each put and put_writes is one atomic round trip.

    `max_connections` and `pool_timeout` (default: $REACTGRAPH_REDIS_MAX_CONNECTIONS, 50, and
    $REACTGRAPH_REDIS_POOL_TIMEOUT, 10 s) bound the connections it holds and how long a call waits for one.
    """

    def __init__(self, client: redis.Redis, *, prefix: str = "reactgraph", ttl: float | None = None,
                 serde: SerializerProtocol | None = None, url: str | None = None,
                 max_connections: int | None = None, pool_timeout: float | None = None) -> None:
        shown = redact(url) if url else client_url(client)
        super().__init__(url=shown, prefix=prefix, ttl=ttl, serde=serde)
        self._wire_up(client, shown, max_connections, pool_timeout)

    @classmethod
    def from_url(cls, url: str, *, prefix: str = "reactgraph", ttl: float | None = None,
                 serde: SerializerProtocol | None = None, max_connections: int | None = None,
                 pool_timeout: float | None = None, **client_options: Any) -> RedisSaver:
        """A saver on the client that every `RedisSaver` and `RedisStore` `from_url` on this URL shares;
        close it with `close()` or use `with RedisSaver.from_url(...) as saver`."""
        return cls._from_shared(url, client_options, max_connections, pool_timeout,
                                prefix=prefix, ttl=ttl, serde=serde)

    def _batch(self, commands: list[Command]) -> list[Any]:
        return self._wire.batch(commands)

    async def _abatch(self, commands: list[Command]) -> list[Any]:
        return await self._wire.abatch(commands)


_ON_ITS_LOOP = ("AsyncRedisSaver was called synchronously (get_state, invoke, ...) on its own event loop's thread, "
                "which would block the loop the call needs: await the async API there (aget_state, ainvoke, "
                "astream), make the sync call from another thread (asyncio.to_thread), or use RedisSaver, "
                "which serves sync and async callers on any thread")
_NO_LOOP = ("AsyncRedisSaver answers sync calls (get_state, invoke, ...) only from another thread while its event "
            "loop runs, and it has none yet: use the async API (aget_state, ainvoke), or RedisSaver in sync code")


class AsyncRedisSaver(BatchSaver):
    """Stores LangGraph checkpoints in plain Redis from asyncio; each aput and aput_writes is one round trip.

    `max_connections` and `pool_timeout` (default: $REACTGRAPH_REDIS_MAX_CONNECTIONS, 50, and
    $REACTGRAPH_REDIS_POOL_TIMEOUT, 10 s) bound the connections it holds and how long a call waits for one.
    """

    _wire: AsyncWire

    def __init__(self, client: redis.asyncio.Redis, *, prefix: str = "reactgraph", ttl: float | None = None,
                 serde: SerializerProtocol | None = None, url: str | None = None,
                 max_connections: int | None = None, pool_timeout: float | None = None) -> None:
        shown = redact(url) if url else client_url(client)
        super().__init__(url=shown, prefix=prefix, ttl=ttl, serde=serde)
        self.client = client
        self._wire = wire_of(client, shown, PoolLimits.resolve(max_connections, pool_timeout))
        self._shared: Shared | None = None

    @classmethod
    def from_url(cls, url: str, *, prefix: str = "reactgraph", ttl: float | None = None,
                 serde: SerializerProtocol | None = None, max_connections: int | None = None,
                 pool_timeout: float | None = None, **client_options: Any) -> AsyncRedisSaver:
        """A saver on the client every `AsyncRedisSaver.from_url` on this URL and event loop shares; close it
        with `aclose()` or `async with AsyncRedisSaver.from_url(...)`."""
        shared = SHARED.acquire(url, client_options, PoolLimits.resolve(max_connections, pool_timeout), True)
        try:
            saver = cls(shared.client, prefix=prefix, ttl=ttl, serde=serde, url=url)
        except BaseException:
            SHARED.release(shared)  # a client that never connected holds nothing to close
            raise
        saver._shared = shared
        return saver

    async def __aenter__(self) -> AsyncRedisSaver:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Give the idle connections back; the last user of a `from_url` client closes it."""
        shared, self._shared = self._shared, None
        if shared is None:
            await self._wire.close()
        elif SHARED.release(shared):
            await shared.wire.close()
            await shared.client.aclose()

    async def ping(self) -> None:
        """Raise CheckpointStoreUnavailable now rather than at the first graph step."""
        await self._wire.call(("PING",))

    async def _abatch(self, commands: list[Command]) -> list[Any]:
        return await self._wire.batch(commands)

    def _batch(self, commands: list[Command]) -> list[Any]:
        """A sync caller's batch, run on the saver's event loop from the caller's (other) thread."""
        loop = self._wire.loop
        if loop is None or loop.is_closed() or not loop.is_running():
            raise asyncio.InvalidStateError(_NO_LOOP)
        try:
            on_loop = asyncio.get_running_loop() is loop
        except RuntimeError:
            on_loop = False
        if on_loop:
            raise asyncio.InvalidStateError(_ON_ITS_LOOP)
        return asyncio.run_coroutine_threadsafe(self._wire.batch(commands), loop).result()
