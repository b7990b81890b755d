"""Circuit-breaker state and its transitions as pure functions, so any store can apply them atomically."""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass(frozen=True, slots=True)
class BreakerSnapshot:
    """Everything a breaker remembers; immutable so a shared store can compare-and-set it."""

    state: BreakerState = BreakerState.CLOSED
    consecutive_failures: int = 0
    opened_at: float = 0.0
    # Start time of the half-open probe in flight; a probe older than the cool-down counts as lost.
    probe_started_at: float | None = None


@dataclass(frozen=True, slots=True)
class BreakerConfig:
    failure_threshold: int = 2
    cooldown_s: float = 30.0


def admit(s: BreakerSnapshot, now: float, cfg: BreakerConfig) -> tuple[bool, BreakerSnapshot]:
    """May a call go through now? Half-open admits a single probe."""
    if s.state is BreakerState.CLOSED:
        return True, s
    if s.state is BreakerState.OPEN:
        if now - s.opened_at >= cfg.cooldown_s:
            return True, replace(s, state=BreakerState.HALF_OPEN, probe_started_at=now)
        return False, s
    probe_lost = s.probe_started_at is None or now - s.probe_started_at >= cfg.cooldown_s
    return (True, replace(s, probe_started_at=now)) if probe_lost else (False, s)


def on_success(s: BreakerSnapshot) -> BreakerSnapshot:
    # A straggler admitted before the circuit opened proves little; only the probe may close it.
    if s.state is BreakerState.OPEN or (s.state is BreakerState.CLOSED and not s.consecutive_failures):
        return s  # (the healthy case returns the same object: no allocation on the hot path)
    return BreakerSnapshot()


def on_failure(s: BreakerSnapshot, now: float, cfg: BreakerConfig) -> BreakerSnapshot:
    failures = s.consecutive_failures + 1
    if s.state is BreakerState.HALF_OPEN or (s.state is BreakerState.CLOSED and failures >= cfg.failure_threshold):
        return BreakerSnapshot(BreakerState.OPEN, failures, opened_at=now)
    return replace(s, consecutive_failures=failures)


def on_neutral(s: BreakerSnapshot) -> BreakerSnapshot:
    """The call never reached the tool (e.g. no concurrency slot): free the probe slot, change nothing else."""
    return replace(s, probe_started_at=None) if s.state is BreakerState.HALF_OPEN else s
