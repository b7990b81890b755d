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
        command, thread_id, ns = self._get_command(config)
        found = self._tuples(thread_id, ns, self._batch([command])[0])
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
        self._batch([self._copy_thread_command(source_thread_id, target_thread_id)])

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        for _ in self._drive(self._prune_plan(thread_ids, strategy)):
            pass

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
        command, thread_id, ns = self._get_command(config)
        found = self._tuples(thread_id, ns, (await self._abatch([command]))[0])
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
        await self._abatch([self._copy_thread_command(source_thread_id, target_thread_id)])

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        async for _ in self._adrive(self._prune_plan(thread_ids, strategy)):
            pass

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
