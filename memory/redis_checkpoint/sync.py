"""`RedisSaver`: the synchronous LangGraph checkpointer on plain Redis 6+ / Valkey (no modules)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import redis
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from reactgraph.memory.redis_checkpoint.core import Plan, RedisSaverCore
from reactgraph.memory.redis_checkpoint.errors import client_url, redact
from reactgraph.memory.redis_checkpoint.usage import ThreadUsage, usage_plan
from reactgraph.memory.redis_checkpoint.wire import SyncWire, WiredClient

_ASYNC_ERROR = ("RedisSaver is synchronous: use AsyncRedisSaver (memory.AsyncRedisSaver) with "
                "ainvoke/astream, or call invoke/stream with this one")


class RedisSaver(WiredClient, RedisSaverCore):
    """Stores LangGraph checkpoints in plain Redis; each put and put_writes is one atomic round trip."""

    def __init__(self, client: redis.Redis, *, prefix: str = "reactgraph", ttl: float | None = None,
                 serde: SerializerProtocol | None = None, url: str | None = None) -> None:
        shown = redact(url) if url else client_url(client)
        super().__init__(url=shown, prefix=prefix, ttl=ttl, serde=serde)
        self.client = client
        self._wire = SyncWire(client, shown)
        self._owns_client = False

    @classmethod
    def from_url(cls, url: str, *, prefix: str = "reactgraph", ttl: float | None = None,
                 serde: SerializerProtocol | None = None, **client_options: Any) -> RedisSaver:
        """A saver with its own client; close it with `close()` or use `with RedisSaver.from_url(...) as saver`."""
        saver = cls(cls.connect(url, client_options), prefix=prefix, ttl=ttl, serde=serde, url=url)
        saver._owns_client = True
        return saver

    # --- BaseCheckpointSaver -------------------------------------------------------------------------

    def put(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
            new_versions: ChannelVersions) -> RunnableConfig:
        command, saved = self._put_command(config, checkpoint, metadata, new_versions)
        self._wire.call(command)
        return saved

    def put_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
                   task_path: str = "") -> None:
        command = self._put_writes_command(config, writes, task_id, task_path)
        if command is not None:
            self._wire.call(command)

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        found = list(self._drive(self._get_plan(config)))
        return found[0] if found else None

    def list(self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
             before: RunnableConfig | None = None, limit: int | None = None) -> Iterator[CheckpointTuple]:
        return self._drive(self._list_plan(config, filter, before, limit))

    def delete_thread(self, thread_id: str) -> None:
        self._wire.call(self._delete_thread_command(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        for _ in self._drive(self._delete_for_runs_plan(run_ids)):
            pass

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self._wire.call(self._copy_thread_command(source_thread_id, target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest", keep: int = 1) -> None:
        """LangGraph's prune; `keep` is how many checkpoints per namespace `keep_latest` keeps (default 1)."""
        for _ in self._drive(self._prune_plan(thread_ids, strategy, keep)):
            pass

    def usage(self, thread_ids: Sequence[str] | None = None) -> tuple[ThreadUsage, ...]:
        """Checkpoints, bytes and last write of each thread (every thread under the prefix if None); no TTL restarts."""
        return tuple(self._drive(usage_plan(self, thread_ids)))  # type: ignore[arg-type]

    # --- recovery: an unreadable checkpoint can be seen and removed --------------------------------------

    def checkpoint_ids(self, config: RunnableConfig, limit: int = 50) -> Sequence[str]:
        """The ids in the thread's index, newest first, readable or not (`list` skips the unreadable ones)."""
        return [i.decode(errors="replace") for i in self._wire.call(self._ids_command(config, limit))]

    def delete_checkpoint(self, config: RunnableConfig) -> bool:
        """Remove the checkpoint `config` names (readable or not) and its writes; False if there was none."""
        return bool(self._wire.call(self._drop_command(config)))

    def _drive(self, plan: Plan) -> Iterator[CheckpointTuple]:
        reply = None
        while True:
            try:
                step = plan.send(reply)
            except StopIteration:
                return
            if isinstance(step, list):
                reply = self._wire.batch(step)
            else:
                reply = None
                yield step

    # --- the async API belongs to AsyncRedisSaver ----------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        raise NotImplementedError(_ASYNC_ERROR)

    async def alist(self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
                    before: RunnableConfig | None = None, limit: int | None = None):
        raise NotImplementedError(_ASYNC_ERROR)
        yield  # pragma: no cover - makes this an async generator, like the base

    async def aput(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
                   new_versions: ChannelVersions) -> RunnableConfig:
        raise NotImplementedError(_ASYNC_ERROR)

    async def aput_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
                          task_path: str = "") -> None:
        raise NotImplementedError(_ASYNC_ERROR)

    async def adelete_thread(self, thread_id: str) -> None:
        raise NotImplementedError(_ASYNC_ERROR)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        raise NotImplementedError(_ASYNC_ERROR)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        raise NotImplementedError(_ASYNC_ERROR)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest", keep: int = 1) -> None:
        raise NotImplementedError(_ASYNC_ERROR)

