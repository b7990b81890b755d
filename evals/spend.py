"""What a comparison spends, counted as it is spent: per run, per model call, and against the total cost cap.

A run's `UsageMeter` counts its model calls and tokens from the replies' usage (the provider's count; a reply
without one gets the one estimate, models/token_estimate.py) and keeps the prompt of every call still in flight,
so a run stopped mid-call (by its time limit, or given up past it) is charged what it sent, not 0.

A run's `RunWatch` stops it at its next model, node or tool start once its time limit has passed
(`TaskTimedOut`), and at its next model call once the comparison's spend — the finished runs' cost and the
running runs' so far, `CostLedger` — has reached the total cost cap (`CostCapReached`): no request starts past
the cap, so the cap is passed by at most what the requests already in flight spend.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage

from reactgraph.errors import ReactGraphError
from reactgraph.models.prices import price_of
from reactgraph.models.token_estimate import usage_for


class UsageMeter(BaseCallbackHandler):
    """Counts chat-model calls and their input/output tokens (thread-safe: act tasks may run in parallel)."""

    def __init__(self) -> None:
        self.model_calls = 0
        self.tokens_in = 0
        self.tokens_out = 0
        self.estimated = 0  # calls whose reply carried no usage: their tokens are the estimate
        self._pending: dict[UUID | None, tuple[list[BaseMessage], int]] = {}  # in flight: prompt, its estimate
        self._lock = threading.Lock()

    def on_chat_model_start(self, serialized: Any, messages: list[list[BaseMessage]], *, run_id: UUID | None = None,
                            **kwargs: Any) -> None:
        prompt = list(messages[0]) if messages else []
        estimate = int(usage_for(prompt, AIMessage(""))["input_tokens"])
        with self._lock:
            self.model_calls += 1
            self._pending[run_id] = (prompt, estimate)

    def on_llm_end(self, response: Any, *, run_id: UUID | None = None, **kwargs: Any) -> None:
        with self._lock:
            prompt, _ = self._pending.pop(run_id, ([], 0))
        tokens_in = tokens_out = estimated = 0
        for generations in response.generations:
            for generation in generations:
                message = getattr(generation, "message", None)
                usage = getattr(message, "usage_metadata", None) or {}
                if not (usage.get("input_tokens") or usage.get("output_tokens")) and isinstance(message, AIMessage):
                    usage, estimated = usage_for(prompt, message), 1  # the provider gave none: the estimate
                tokens_in += int(usage.get("input_tokens", 0) or 0)
                tokens_out += int(usage.get("output_tokens", 0) or 0)
        with self._lock:
            self.tokens_in += tokens_in
            self.tokens_out += tokens_out
            self.estimated += estimated

    def on_llm_error(self, error: BaseException, *, run_id: UUID | None = None, **kwargs: Any) -> None:
        with self._lock:  # a refused or failed request: the provider reports no usage for it
            self._pending.pop(run_id, None)

    def in_flight_tokens(self) -> int:
        """The estimated prompt tokens of the calls sent and not yet answered."""
        with self._lock:
            return sum(estimate for _, estimate in self._pending.values())

    def counts(self, in_flight: bool = False) -> dict[str, int]:
        """The record's fields: model calls and tokens so far (with the prompts in flight when `in_flight`)."""
        with self._lock:
            pending = sum(estimate for _, estimate in self._pending.values()) if in_flight else 0
            tokens_in, tokens_out = self.tokens_in + pending, self.tokens_out
            return {"model_calls": self.model_calls, "tokens_in": tokens_in, "tokens_out": tokens_out,
                    "tokens": tokens_in + tokens_out}


def tokens_cost(tokens_in: int, tokens_out: int, model: str) -> float | None:
    """What the tokens cost at the model's price (USD); None when no price table knows the model."""
    price = price_of(model)
    if price is None:
        return None
    return round((tokens_in * price[0] + tokens_out * price[1]) / 1_000_000, 9)


def record_cost(record: dict[str, Any], model: str) -> float | None:
    """What a run's tokens cost at the model's price (USD); None when no price table knows the model."""
    return tokens_cost(int(record.get("tokens_in") or 0), int(record.get("tokens_out") or 0), model)


def total_cost(records: Iterable[dict[str, Any]]) -> float | None:
    costs = [r.get("cost_usd") for r in records]
    return None if any(c is None for c in costs) else round(sum(float(c or 0) for c in costs), 6)


class CostLedger:
    """The comparison's spend: the finished runs' cost plus the running runs' so far (their prompts in flight
    included), held against `cap` (None: no cap)."""

    def __init__(self, model: str, cap: float | None = None, spent: float | None = 0.0) -> None:
        self.model, self.cap = model, cap
        self._finished = spent
        self._running: list[UsageMeter] = []
        self._lock = threading.Lock()

    def track(self, meter: UsageMeter) -> None:
        with self._lock:
            self._running.append(meter)

    def settle(self, meter: UsageMeter | None, cost: float | None) -> None:
        """A run ended: its record's cost replaces its meter's running count."""
        with self._lock:
            if meter is not None and meter in self._running:
                self._running.remove(meter)
            self._finished = None if self._finished is None or cost is None else self._finished + cost

    def spent(self) -> float | None:
        """USD spent so far; None when a cost is unknown (no price for the model)."""
        with self._lock:
            running = [m.counts(in_flight=True) for m in self._running]
            finished = self._finished
        if finished is None:
            return None
        costs = [tokens_cost(c["tokens_in"], c["tokens_out"], self.model) for c in running]
        return None if any(c is None for c in costs) else finished + sum(c or 0.0 for c in costs)

    def reached(self) -> bool:
        spent = self.spent() if self.cap is not None else None
        return spent is not None and self.cap is not None and spent >= self.cap

    def stop_line(self) -> str:
        return f"stopped at the cost cap: ${self.spent() or 0:.4f} of ${self.cap or 0:g} spent"


class RunStopped(ReactGraphError):
    """Raised into a run by its `RunWatch`: the eval stopped it, the model did not end it."""


class TaskTimedOut(RunStopped):
    """The run's time limit has passed."""


class CostCapReached(RunStopped):
    """The comparison's total cost cap has been reached: no further model call starts."""


class RunWatch(BaseCallbackHandler):
    """One run's meter, time limit (`deadline`, time.monotonic(); None: none) and the comparison's cost cap
    (`ledger`); hand it to the run's callbacks before the meter."""

    raise_error = True  # LangChain swallows a callback's errors unless the handler asks for them to be raised

    def __init__(self, deadline: float | None = None, limit_s: float | None = None,
                 ledger: CostLedger | None = None) -> None:
        self.deadline, self.limit_s, self.ledger = deadline, limit_s, ledger
        self.meter = UsageMeter()
        self.expired = False
        self.cut: str | None = None  # the cost cap's line, once the cap stopped this run
        if ledger is not None:
            ledger.track(self.meter)

    def _check(self) -> None:
        if self.deadline is not None and time.monotonic() >= self.deadline:
            self.expired = True
            raise TaskTimedOut(f"task timed out after {self.limit_s or 0:g} s")

    def on_chain_start(self, serialized: Any, inputs: Any, **kwargs: Any) -> None:
        self._check()

    def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        self._check()
        if self.ledger is not None and self.ledger.reached():
            self.cut = self.ledger.stop_line()
            raise CostCapReached(self.cut)

    def on_tool_start(self, serialized: Any, input_str: str, **kwargs: Any) -> None:
        self._check()
