"""Fault injection at the gateway: each tool attempt fails at a seeded rate and takes a seeded extra latency.

`faulty_gateway(plan, key)` builds a gateway whose tools are the default gateway's `ToolMeta`s with their
`run` wrapped; the gateway's pipeline (validation, breaker, retry, timeout) is the real one, so what is
measured is how the graphs *and* the gateway cope. Nothing in `tools/` is changed.

Determinism: whether an attempt fails is decided by `Random(f"{key}|{tool}|{args}|{n}")`, n = how many times
this run has invoked the tool with these arguments. It does not depend on the order in which concurrent calls
reach the tool, so the same seed gives the same faults, whatever the scheduling.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import random
import threading
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from reactgraph.tools import ToolError, ToolGateway, ToolMeta, TransientToolError, default_gateway
from reactgraph.tools.resilience import Retry

LATENCY_SHAPES = ("fixed", "uniform", "exponential")


@dataclass(frozen=True)
class FaultPlan:
    """What to inject into every tool attempt.

    - `failure_rate`: probability that one attempt (the gateway retries transient failures) raises;
    - `transient_share`: of those, the share raised as `TransientToolError` (retried by the gateway, with
      fresh draws) rather than `ToolError` (reported at once);
    - `latency_ms` / `latency_shape`: extra latency before each attempt: fixed, uniform on [0, 2·mean] or
      exponential with that mean;
    - `max_attempts`: attempts the gateway gives each tool (None keeps the tool's own: the offline built-ins
      are local and have 1, so a transient fault is not retried; 3 makes them behave like remote tools);
    - `retry_base_delay_s`: the gateway's backoff base for this eval (shorter than production's 0.2 s to keep
      runs quick; wall times under faults are therefore not production latencies).
    """

    failure_rate: float = 0.0
    transient_share: float = 0.5
    latency_ms: float = 0.0
    latency_shape: str = "exponential"
    max_attempts: int | None = None
    retry_base_delay_s: float = 0.01

    def __post_init__(self) -> None:
        if not 0.0 <= self.failure_rate <= 1.0:
            raise ValueError(f"tool failure rate must be between 0 and 1, not {self.failure_rate:g}")
        if not 0.0 <= self.transient_share <= 1.0:
            raise ValueError(f"transient share must be between 0 and 1, not {self.transient_share:g}")
        if self.latency_ms < 0:
            raise ValueError(f"tool latency must be >= 0 ms, not {self.latency_ms:g}")
        if self.max_attempts is not None and self.max_attempts < 1:
            raise ValueError(f"max attempts must be at least 1, not {self.max_attempts}")
        if self.latency_shape not in LATENCY_SHAPES:
            raise ValueError(f"latency shape must be one of {', '.join(LATENCY_SHAPES)}, not {self.latency_shape!r}")

    @property
    def active(self) -> bool:
        return self.failure_rate > 0 or self.latency_ms > 0

    def delay_s(self, rng: random.Random) -> float:
        if self.latency_ms <= 0:
            return 0.0
        mean = self.latency_ms / 1000
        if self.latency_shape == "fixed":
            return mean
        if self.latency_shape == "uniform":
            return rng.uniform(0, 2 * mean)
        return rng.expovariate(1 / mean)


class FaultInjector:
    """Decides, per tool attempt, the injected latency and whether it fails; counts what it injected."""

    def __init__(self, plan: FaultPlan, key: str, scripted: Mapping[str, str] | None = None) -> None:
        self.plan, self.key, self.scripted = plan, key, dict(scripted or {})
        self._attempts: Counter[tuple[str, str]] = Counter()
        self._calls: Counter[str] = Counter()  # attempts per tool, whatever the arguments: "first" counts these
        self._lock = threading.Lock()  # act tasks may run on several threads' event loops
        self.injected: Counter[str] = Counter()  # "transient" / "error" → how many were raised

    def draw(self, tool: str, args: dict[str, Any]) -> random.Random:
        digest = hashlib.sha256(json.dumps(args, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()
        with self._lock:
            n = self._attempts[(tool, digest)]
            self._attempts[(tool, digest)] += 1
        return random.Random(f"{self.key}|{tool}|{digest[:16]}|{n}")

    def _scripted_fault(self, name: str) -> None:
        """The task's own fault for this tool: a plain error (not retried), as a service that is down gives."""
        mode = self.scripted.get(name)
        with self._lock:
            first = self._calls[name] == 0
            self._calls[name] += 1
        if mode == "down" or (mode == "first" and first):
            with self._lock:
                self.injected["scripted"] += 1
            if mode == "first":  # a blip, worded as one: a capable agent tries again
                raise ToolError(f"{name} is temporarily unavailable (the task's scripted fault: its first call fails)")
            raise ToolError(f"{name} failed: the service is down (the task's scripted fault)")

    def wrap(self, meta: ToolMeta) -> ToolMeta:
        """The same tool, its `run` preceded by the injected latency and failure."""
        inner, plan, name = meta.run, self.plan, meta.name

        async def run(**kwargs: Any) -> Any:
            self._scripted_fault(name)
            rng = self.draw(name, kwargs)
            if delay := plan.delay_s(rng):
                await asyncio.sleep(delay)
            if rng.random() < plan.failure_rate:
                transient = rng.random() < plan.transient_share
                with self._lock:
                    self.injected["transient" if transient else "error"] += 1
                if transient:
                    raise TransientToolError(f"{name} is temporarily unavailable (injected fault: simulated 503)")
                raise ToolError(f"{name} failed (injected fault: simulated outage)")
            if meta.is_async:
                return await inner(**kwargs)
            value = await asyncio.to_thread(inner, **kwargs)
            return await value if asyncio.iscoroutine(value) else value

        attempts = plan.max_attempts or meta.max_attempts
        return replace(meta, run=run, max_attempts=attempts)


@functools.cache
def default_tools() -> tuple[ToolMeta, ...]:
    """The default gateway's tools, built once per process (deriving their schemas is most of a gateway's cost)."""
    return tuple(default_gateway().registry)


def faulty_gateway(plan: FaultPlan, key: str, base: ToolGateway | None = None,
                   scripted: Mapping[str, str] | None = None) -> tuple[ToolGateway, FaultInjector]:
    """A fresh gateway (its own circuit breakers) with `base`'s tools (default: the built-ins) wrapped by `plan`
    and by the task's `scripted` faults (tool name -> "first" or "down").

    Fresh per run so one task's failures never open a breaker for the next task; the tools themselves are
    stateless functions and are shared.
    """
    injector = FaultInjector(plan, key, scripted)
    tools = list(base.registry) if base is not None else list(default_tools())
    metas = [injector.wrap(meta) for meta in tools] if plan.active or scripted else tools
    retry = Retry(base_delay_s=plan.retry_base_delay_s, rng=random.Random(f"{key}|retry"))
    return ToolGateway(metas, retry=retry), injector
