"""`AsyncRedisSaver`: the asyncio LangGraph checkpointer on plain Redis 6+ / Valkey (no modules)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import redis.asyncio
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from reactgraph.memory.redis_checkpoint.core import Plan, RedisSaverCore
from reactgraph.memory.redis_checkpoint.errors import check_url, client_url, redact
from reactgraph.memory.redis_checkpoint.usage import ThreadUsage, usage_plan
from reactgraph.memory.redis_checkpoint.wire import AsyncWire, client_kwargs

_SYNC_ERROR = ("AsyncRedisSaver is asynchronous: use RedisSaver (memory.RedisSaver) with invoke/stream, "
               "or call ainvoke/astream (aget_state, ...) with this one")


class AsyncRedisSaver(RedisSaverCore):
    """Stores LangGraph checkpoints in plain Redis from asyncio; each aput and aput_writes is one round trip."""

    def __init__(self, client: redis.asyncio.Redis, *, prefix: str = "reactgraph", ttl: float | None = None,
                 serde: SerializerProtocol | None = None, url: str | None = None) -> None:
        shown = redact(url) if url else client_url(client)
        super().__init__(url=shown, prefix=prefix, ttl=ttl, serde=serde)
        self.client = client
        self._wire = AsyncWire(client, shown)
        self._owns_client = False

    @classmethod
    def from_url(cls, url: str, *, prefix: str = "reactgraph", ttl: float | None = None,
                 serde: SerializerProtocol | None = None, **client_options: Any) -> AsyncRedisSaver:
        """A saver with its own client; close it with `aclose()` or `async with AsyncRedisSaver.from_url(...)`."""
        client = redis.asyncio.Redis.from_url(check_url(url), **client_kwargs(url, client_options))
        saver = cls(client, prefix=prefix, ttl=ttl, serde=serde, url=url)
        saver._owns_client = True
        return saver

    async def __aenter__(self) -> AsyncRedisSaver:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Give the borrowed connections back, and close the client if the saver made it."""
        await self._wire.close()
        if self._owns_client:
            await self.client.aclose()

    async def ping(self) -> None:
        """Raise CheckpointStoreUnavailable now rather than at the first graph step."""
        await self._wire.call(("PING",))

    # --- BaseCheckpointSaver, async ------------------------------------------------------------------

    async def aput(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
                   new_versions: ChannelVersions) -> RunnableConfig:
        command, saved = self._put_command(config, checkpoint, metadata, new_versions)
        await self._wire.call(command)
        return saved

    async def aput_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
                          task_path: str = "") -> None:
        command = self._put_writes_command(config, writes, task_id, task_path)
        if command is not None:
            await self._wire.call(command)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        found = [tup async for tup in self._drive(self._get_plan(config))]
        return found[0] if found else None

    async def alist(self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
                    before: RunnableConfig | None = None, limit: int | None = None
                    ) -> AsyncIterator[CheckpointTuple]:
        async for tup in self._drive(self._list_plan(config, filter, before, limit)):
            yield tup

    async def adelete_thread(self, thread_id: str) -> None:
        await self._wire.call(self._delete_thread_command(thread_id))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        async for _ in self._drive(self._delete_for_runs_plan(run_ids)):
            pass

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self._wire.call(self._copy_thread_command(source_thread_id, target_thread_id))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest", keep: int = 1) -> None:
        """LangGraph's prune; `keep` is how many checkpoints per namespace `keep_latest` keeps (default 1)."""
        async for _ in self._drive(self._prune_plan(thread_ids, strategy, keep)):
            pass

    async def ausage(self, thread_ids: Sequence[str] | None = None) -> tuple[ThreadUsage, ...]:
        """Checkpoints, bytes and last write of each thread (every thread under the prefix if None); no TTL restarts."""
        return tuple([u async for u in self._drive(usage_plan(self, thread_ids))])  # type: ignore[misc]

    # --- recovery: an unreadable checkpoint can be seen and removed --------------------------------------

    async def acheckpoint_ids(self, config: RunnableConfig, limit: int = 50) -> list[str]:
        """The ids in the thread's index, newest first, readable or not (`alist` skips the unreadable ones)."""
        return [i.decode(errors="replace") for i in await self._wire.call(self._ids_command(config, limit))]

    async def adelete_checkpoint(self, config: RunnableConfig) -> bool:
        """Remove the checkpoint `config` names (readable or not) and its writes; False if there was none."""
        return bool(await self._wire.call(self._drop_command(config)))

    async def _drive(self, plan: Plan) -> AsyncIterator[CheckpointTuple]:
        reply = None
        while True:
            try:
                step = plan.send(reply)
            except StopIteration:
                return
            if isinstance(step, list):
                reply = await self._wire.batch(step)
            else:
                reply = None
                yield step

    # --- the sync API belongs to RedisSaver ----------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        raise NotImplementedError(_SYNC_ERROR)

    def list(self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
             before: RunnableConfig | None = None, limit: int | None = None):
        raise NotImplementedError(_SYNC_ERROR)

    def put(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
            new_versions: ChannelVersions) -> RunnableConfig:
        raise NotImplementedError(_SYNC_ERROR)

    def put_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
                   task_path: str = "") -> None:
        raise NotImplementedError(_SYNC_ERROR)

    def delete_thread(self, thread_id: str) -> None:
        raise NotImplementedError(_SYNC_ERROR)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        raise NotImplementedError(_SYNC_ERROR)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        raise NotImplementedError(_SYNC_ERROR)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest", keep: int = 1) -> None:
        raise NotImplementedError(_SYNC_ERROR)
