"""Every `BaseCheckpointSaver` method, sync and async, written once over two primitives: `_batch` and `_abatch`.

`RedisSaver` sends batches on its thread and hands async callers' batches to worker threads;
`AsyncRedisSaver` sends them on its event loop and takes other threads' sync calls onto that loop. Either
saver so serves `invoke` and `ainvoke` alike, as LangGraph's Postgres savers do, with the logic (the
commands and plans of `core.py`) in one place.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata, CheckpointTuple

from reactgraph.memory.redis_checkpoint.core import Plan, RedisSaverCore
from reactgraph.memory.redis_checkpoint.thread_copy import copy_thread_plan
from reactgraph.memory.redis_checkpoint.usage import ThreadUsage, usage_plan
from reactgraph.memory.redis_checkpoint.wire import Command


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

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest", keep: int = 1) -> None:
        """LangGraph's prune; `keep` is how many checkpoints per namespace `keep_latest` keeps (default 1)."""
        for _ in self._drive(self._prune_plan(thread_ids, strategy, keep)):
            pass

    def usage(self, thread_ids: Sequence[str] | None = None) -> tuple[ThreadUsage, ...]:
        """Checkpoints, bytes and last write of each thread (every thread under the prefix if None); no TTL restarts."""
        return tuple(self._drive(usage_plan(self, thread_ids)))  # type: ignore[arg-type]

    def thread_ids(self) -> Sequence[str]:
        """Every thread that has checkpoints under this prefix, sorted (a SCAN: for admin use, not a hot path)."""
        return [str(t) for t in self._drive(self._thread_ids_plan())]

    def checkpoint_ids(self, config: RunnableConfig, limit: int = 50) -> Sequence[str]:
        """The ids in the thread's index, newest first, readable or not (`list` skips the unreadable ones)."""
        return [i.decode(errors="replace") for i in self._batch([self._ids_command(config, limit)])[0]]

    def delete_checkpoint(self, config: RunnableConfig) -> bool:
        """Remove the checkpoint `config` names (readable or not) and its writes; False if there was none."""
        return bool(self._batch([self._drop_command(config)])[0])

    def _thread_ids_plan(self) -> Plan:
        yield from (yield from self._threads_plan())  # the listing's commands, then each id as a result

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

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest", keep: int = 1) -> None:
        """LangGraph's prune; `keep` is how many checkpoints per namespace `keep_latest` keeps (default 1)."""
        async for _ in self._adrive(self._prune_plan(thread_ids, strategy, keep)):
            pass

    async def ausage(self, thread_ids: Sequence[str] | None = None) -> tuple[ThreadUsage, ...]:
        """Checkpoints, bytes and last write of each thread (every thread under the prefix if None); no TTL restarts."""
        return tuple([u async for u in self._adrive(usage_plan(self, thread_ids))])  # type: ignore[misc]

    async def athread_ids(self) -> Sequence[str]:
        """Every thread that has checkpoints under this prefix, sorted (a SCAN: for admin use, not a hot path)."""
        return [str(t) async for t in self._adrive(self._thread_ids_plan())]

    async def acheckpoint_ids(self, config: RunnableConfig, limit: int = 50) -> Sequence[str]:
        """The ids in the thread's index, newest first, readable or not (`alist` skips the unreadable ones)."""
        return [i.decode(errors="replace") for i in (await self._abatch([self._ids_command(config, limit)]))[0]]

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
