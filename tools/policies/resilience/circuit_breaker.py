"""The circuit breaker: a per-tool breaker (CLOSED → OPEN → HALF_OPEN probe → CLOSED).

Our own small class rather than purgatory or pybreaker: purgatory reads `time.time()` directly (no
injectable clock) and lets every call through while half-open; pybreaker's async support goes through
Tornado. We need one probe at a time, a testable clock, and state that can live in Redis.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from reactgraph.tools import observations
from reactgraph.tools.policies.base import CallContext, Handler
from reactgraph.tools.policies.observability.events import emit
from reactgraph.tools.policies.resilience.breaker_state import (
    BreakerConfig,
    BreakerSnapshot,
    BreakerState,
    admit,
    on_failure,
    on_neutral,
    on_success,
)
from reactgraph.tools.policies.resilience.breaker_store import BreakerStore, MemoryBreakerStore
from reactgraph.tools.registry import ToolRegistry
from reactgraph.tools.result import ToolResult, ToolStatus


class CircuitBreaker:
    """One tool's breaker. Errors and timeouts count as failures; refusals before the tool ran do not."""

    def __init__(self, name: str, config: BreakerConfig | None = None, *,
                 clock: Callable[[], float] = time.time, store: BreakerStore | None = None) -> None:
        self.name = name
        self.config = config or BreakerConfig()
        self.clock = clock
        self.store = store or MemoryBreakerStore()

    async def try_acquire(self) -> bool:
        return await self.admit() is not None

    async def admit(self, call: CallContext | None = None) -> BreakerState | None:
        """Admit a call now: the state it was admitted in (CLOSED, or else it is the probe), or None if refused."""
        now = self.clock()

        def change(s: BreakerSnapshot) -> tuple[tuple[BreakerState | None, BreakerSnapshot, BreakerSnapshot],
                                                BreakerSnapshot]:
            admitted, new = admit(s, now, self.config)
            return ((s.state if admitted else None), s, new), new

        admitted_in, old, new = await self.store.update(self.name, change)
        if call is not None and call.sink is not None:
            self._announce(call, old, new)
        return admitted_in

    async def record(self, status: ToolStatus, call: CallContext | None = None) -> None:
        now = self.clock()
        if status.counts_as_failure:
            step = lambda s: on_failure(s, now, self.config)  # noqa: E731
        elif status in (ToolStatus.RATE_LIMITED, ToolStatus.INVALID_ARGS):  # neither failure nor proof of health
            step = on_neutral
        else:
            step = on_success

        def change(s: BreakerSnapshot) -> tuple[tuple[BreakerSnapshot, BreakerSnapshot], BreakerSnapshot]:
            new = step(s)
            return (s, new), new

        old, new = await self.store.update(self.name, change)
        if call is not None and call.sink is not None:
            self._announce(call, old, new)

    def _announce(self, call: CallContext, old: BreakerSnapshot, new: BreakerSnapshot) -> None:
        """A `breaker` event when this call moved the circuit (open, half_open, closed); only the mover tells."""
        if new.state is not old.state and call.sink is not None:
            emit(call.sink, self.name, call.call_id, "breaker", state=new.state.value, previous=old.state.value,
                 failures=new.consecutive_failures, cooldown_s=self.config.cooldown_s)

    async def snapshot(self) -> BreakerSnapshot:
        return await self.store.read(self.name)

    def retry_in(self, snapshot: BreakerSnapshot) -> float:
        """Seconds until an open circuit admits its probe."""
        return max(0.0, snapshot.opened_at + self.config.cooldown_s - self.clock())


class CircuitBreakers:
    """The breakers of a gateway, one per tool, created on first use and sharing one store and clock."""

    def __init__(self, config: BreakerConfig | None = None, *, clock: Callable[[], float] = time.time,
                 store: BreakerStore | None = None) -> None:
        self.config = config or BreakerConfig()
        self.clock = clock
        self.store = store or MemoryBreakerStore()
        self._breakers: dict[str, CircuitBreaker] = {}

    def for_tool(self, name: str) -> CircuitBreaker:
        breaker = self._breakers.get(name)
        if breaker is None:
            breaker = self._breakers[name] = CircuitBreaker(name, self.config, clock=self.clock, store=self.store)
        return breaker


def refusal(call: CallContext, breaker: CircuitBreaker, snap: BreakerSnapshot, others: list[str]) -> ToolResult:
    """The `circuit_open` result: when the tool will be tried again, and which tools remain."""
    retry_in = breaker.retry_in(snap)
    return call.result(ToolStatus.CIRCUIT_OPEN,
                       observations.circuit_open(call.name, retry_in, snap.consecutive_failures, others),
                       retry_in_s=round(retry_in, 3))


class CircuitBreakerPolicy:
    """Short-circuits calls to a tool whose circuit is open, telling the model when it will be retried."""

    def __init__(self, breakers: CircuitBreakers, registry: ToolRegistry) -> None:
        self.breakers = breakers
        self.registry = registry

    async def __call__(self, call: CallContext, proceed: Handler) -> ToolResult:
        breaker = self.breakers.for_tool(call.name)
        admitted_in = await breaker.admit(call)
        if admitted_in is None:
            others = [n for n in self.registry.available_names(call.session) if n != call.name]
            return refusal(call, breaker, await breaker.snapshot(), others)
        call.breaker_probe = admitted_in is not BreakerState.CLOSED
        result = await proceed(call)
        if not call.breaker_settled:  # it never got a concurrency slot (rate_limited)
            await breaker.record(result.status, call)
        return result


class BreakerRecheck:
    """Inside the concurrency slot: asks the breaker again after a wait, and records the outcome before the
    slot is given up, so the calls queued behind see the circuit as this call left it.

    Without it, 40 calls of a hanging tool in one model reply all passed the breaker while it was closed,
    queued for the 5 slots, and then ran (and hung) one batch after another long after the circuit opened.
    A call that waited is admitted again only if the circuit is still closed, or as the new half-open probe.
    """

    def __init__(self, breakers: CircuitBreakers, registry: ToolRegistry) -> None:
        self.breakers = breakers
        self.registry = registry

    async def __call__(self, call: CallContext, proceed: Handler) -> ToolResult:
        breaker = self.breakers.for_tool(call.name)
        call.breaker_settled = True
        if call.waited_for_slot and not call.breaker_probe:
            snap = await breaker.snapshot()
            if snap.state is not BreakerState.CLOSED:
                if await breaker.admit(call) is None:  # it never ran: nothing to record
                    others = [n for n in self.registry.available_names(call.session) if n != call.name]
                    return refusal(call, breaker, await breaker.snapshot(), others)
                call.breaker_probe = True
        result = await proceed(call)
        await breaker.record(result.status, call)
        return result
