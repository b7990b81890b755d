"""What a worker may do to a thread while it holds the thread's session lease, fenced.

Taking the thread bumps its fence counter; every later write of this holder (taking the next run, adding an
event, ending a run) runs in a script that first checks the counter still has this holder's number. A
worker that lost its lease without noticing (a long pause, a partition) and woke up after another took over
is refused there instead of interleaving its writes with the new holder's.
"""

from __future__ import annotations

import redis.asyncio

from reactgraph.errors import ReactGraphError
from reactgraph.service.events import EVENTS_KEPT_S, MAX_EVENT_BYTES, MAX_EVENTS_PER_RUN, bounded
from reactgraph.service.keys import ServiceKeys

# KEYS: fence, active, pending, attempts. Returns {run id, resumed 0|1, attempt} or {} (nothing to do), or -1
# (fenced out). The attempt is counted here, in the step that hands the run out, so a worker that dies at any
# point after it has still used one.
_NEXT_RUN = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
local active = redis.call('GET', KEYS[2])
if active then return {active, 1, redis.call('HINCRBY', KEYS[4], active, 1)} end
local id = redis.call('LPOP', KEYS[3])
if not id then return {} end
redis.call('SET', KEYS[2], id)
redis.call('HSET', KEYS[4], id, 1)
return {id, 0, 1}
"""
# KEYS: fence, active, attempts. ARGV: fence. A run handed back by a worker shutting down has not crashed it: the
# attempt it was given is not counted against it.
_HAND_BACK = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
local active = redis.call('GET', KEYS[2])
if active and tonumber(redis.call('HGET', KEYS[3], active) or '0') > 1 then
  redis.call('HINCRBY', KEYS[3], active, -1)
end
return 1
"""
# KEYS: fence, events. ARGV: fence, event, data, max length.
_ADD_EVENT = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
return redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[4], '*', 'e', ARGV[2], 'd', ARGV[3])
"""
# KEYS: fence, active, run, events, attempts. ARGV: fence, run id, run json, seconds to keep the events, max length.
_END_RUN = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
if redis.call('GET', KEYS[2]) == ARGV[2] then redis.call('DEL', KEYS[2]) end
redis.call('HDEL', KEYS[5], ARGV[2])
if ARGV[3] ~= '' then redis.call('SET', KEYS[3], ARGV[3]) end
redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[5], '*', 'e', '__end__', 'd', '')
redis.call('EXPIRE', KEYS[4], ARGV[4])
return 1
"""


class FencedOut(ReactGraphError, RuntimeError):
    """Another worker took the thread over: this one must stop writing to it."""


class ThreadHold:
    """One worker's hold on one thread (under its session lease), with the fence number it was given."""

    def __init__(self, client: redis.asyncio.Redis, keys: ServiceKeys, thread_id: str, fence: str,
                 max_event_bytes: int = MAX_EVENT_BYTES) -> None:
        self.client, self.keys, self.thread_id, self.fence = client, keys, thread_id, fence
        self.max_event_bytes = max_event_bytes
        self._next = client.register_script(_NEXT_RUN)
        self._add = client.register_script(_ADD_EVENT)
        self._end = client.register_script(_END_RUN)
        self._hand_back = client.register_script(_HAND_BACK)

    @classmethod
    async def take(cls, client: redis.asyncio.Redis, keys: ServiceKeys, thread_id: str,
                   max_event_bytes: int = MAX_EVENT_BYTES) -> ThreadHold:
        """Called with the thread's lease held: a new fence number, so earlier holders are refused from now."""
        fence = await client.incr(keys.fence(thread_id))
        return cls(client, keys, thread_id, str(fence), max_event_bytes)

    async def next_run(self) -> tuple[str, bool, int] | None:
        """The run to execute now: (run id, resumed, attempt) — the active run left by a holder that died is
        resumed first, its attempt counting how many holders have taken it — or None when nothing waits."""
        k = self.keys
        answer = await self._next(keys=[k.fence(self.thread_id), k.active(self.thread_id), k.pending(self.thread_id),
                                        k.attempts(self.thread_id)], args=[self.fence])
        if answer == -1:
            raise FencedOut(f"thread {self.thread_id}: another worker holds it now")
        if not answer:
            return None
        run_id = answer[0].decode() if isinstance(answer[0], bytes) else str(answer[0])
        return run_id, bool(int(answer[1])), int(answer[2])

    async def hand_back(self) -> None:
        """The worker is shutting down with the active run unfinished: its attempt does not count (it did not
        crash); the next holder resumes it."""
        k = self.keys
        await self._hand_back(keys=[k.fence(self.thread_id), k.active(self.thread_id), k.attempts(self.thread_id)],
                              args=[self.fence])

    async def add_event(self, run_id: str, event: str, data: str) -> str:
        """Append an event (its data bounded: see events.bounded) to the run's stream; its entry id."""
        answer = await self._add(keys=[self.keys.fence(self.thread_id), self.keys.events(self.thread_id, run_id)],
                                 args=[self.fence, event, bounded(event, data, self.max_event_bytes),
                                       MAX_EVENTS_PER_RUN])
        if answer == -1:
            raise FencedOut(f"thread {self.thread_id}: another worker holds it now")
        return answer.decode() if isinstance(answer, bytes) else str(answer)

    async def end_run(self, run_id: str, run_json: str) -> None:
        """Store the run's final record, close its event stream and free the thread for its next run."""
        k = self.keys
        answer = await self._end(keys=[k.fence(self.thread_id), k.active(self.thread_id), k.run(self.thread_id, run_id),
                                       k.events(self.thread_id, run_id), k.attempts(self.thread_id)],
                                 args=[self.fence, run_id, run_json, EVENTS_KEPT_S, MAX_EVENTS_PER_RUN])
        if answer == -1:
            raise FencedOut(f"thread {self.thread_id}: another worker holds it now")
