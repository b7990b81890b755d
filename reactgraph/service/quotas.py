"""What one caller may keep or hold at once, so that no caller can fill a limit for everyone: the quotas, and the
stream slots of an API process.

The owner is the authenticated identity (one anonymous owner without auth). What is kept — threads,
assistants, versions, runs in flight, store items — is counted in the Redis script that adds it, so concurrent
creates never pass a quota; the operator sets them in langgraph.json (`reactgraph.quotas`) or with `--quota`
(null or 0 lifts one). Stream slots bound a process's open streams, joins and waits, each of which holds a
connection of their own Redis client in a blocking XREAD: past the bound, or an owner's `stream_slots`, a reader
gets a 429 with Retry-After instead of emptying the pool every other request waits on.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request

from reactgraph.errors import ReactGraphError
from reactgraph.service.auth import caller_of
from reactgraph.service.wire import BadRequest

# name → (default, what it counts, status of a refusal)
QUOTAS: dict[str, tuple[int | None, str, int]] = {
    "threads": (10_000, "threads", 409),
    "assistants": (1_000, "assistants", 409),
    "versions": (1_000, "versions of one assistant", 409),
    "store_items": (10_000, "store items put through the API", 409),
    # without auth every caller is one owner, so these two are the whole server's: set to what one busy client
    # (a load test's 50 clients, 4 runs each) stays within
    "runs_in_flight": (1_000, "runs pending or running", 429),
    "stream_slots": (50, "streams, joins and waits open on one API process", 429),
}
ANONYMOUS = "anonymous"
RETRY_AFTER_S = 5


class BadQuota(ReactGraphError, ValueError):
    """A `reactgraph.quotas` entry or --quota flag the service cannot start with (one line naming it)."""


class QuotaReached(BadRequest):
    """A create or hold past the caller's quota: 409 or 429, one line naming the quota."""

    def __init__(self, name: str, limit: int, owner: str) -> None:
        _default, what, status = QUOTAS[name]
        advice = "delete some first" if status == 409 else "retry later"
        headers = {"Retry-After": str(RETRY_AFTER_S)} if status == 429 else None
        super().__init__(status, f"quota {name!r} reached: {owner_label(owner)} may have at most {limit} {what} "
                                 f"(reactgraph.quotas.{name}): {advice}", headers=headers)


@dataclass(frozen=True)
class Quotas:
    """The operator's quotas (None: no limit)."""

    limits: Mapping[str, int | None] = field(default_factory=lambda: {n: d for n, (d, _w, _s) in QUOTAS.items()})

    def of(self, name: str) -> int | None:
        return self.limits.get(name)


def owner_of(request: Request) -> str:
    """Whose quota a request counts against: "u:<identity>", or the anonymous owner without auth."""
    caller = caller_of(request)
    return ANONYMOUS if caller is None else f"u:{caller.identity}"


def owner_label(owner: str) -> str:
    """An owner in words: a caller, every caller (no auth), or what else holds the quota (an assistant)."""
    if owner.startswith("u:"):
        return f"caller {owner[2:][:80]!r}"
    return "this server's callers (no auth)" if owner == ANONYMOUS else owner


def quotas_of(request: Request) -> Quotas:
    return getattr(request.app.state, "quotas", None) or Quotas()


def quotas_from(section: Mapping[str, Any], flags: Iterable[str] = (), *, where: str = "langgraph.json") -> Quotas:
    """The quotas from the `reactgraph.quotas` object of a langgraph.json and `--quota NAME=N` flags."""
    given = section.get("quotas", {})
    if not isinstance(given, dict):
        raise BadQuota(f"{where}: reactgraph.quotas must be an object of quota name → number or null")
    chosen: dict[str, Any] = {**Quotas().limits, **given}
    for flag in flags:
        name, sep, value = flag.partition("=")
        if not sep:
            raise BadQuota(f"--quota {flag!r}: expected NAME=N (N a number, or 0 for no limit)")
        try:
            chosen[name.strip()] = int(value)
        except ValueError:
            raise BadQuota(f"--quota {flag!r}: {value!r} is not a whole number") from None
    if unknown := sorted(set(chosen) - set(QUOTAS)):
        raise BadQuota(f"{where}: unknown quota(s) {', '.join(unknown)}; known: {', '.join(QUOTAS)}")
    for name, value in chosen.items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise BadQuota(f"{where}: reactgraph.quotas.{name} must be a whole number (0 or null: no limit), "
                           f"not {value!r}")
    return Quotas({name: value or None for name, value in chosen.items()})


_HOLDER: ContextVar[str | None] = ContextVar("stream_slot_holder", default=None)



class StreamSlots:
    """Slots for the process's event readers, and the Redis client they read with (a pool of `limit` + 1)."""

    def __init__(self, client: Any, limit: int, per_owner: int | None = None) -> None:
        self.client, self.limit, self.per_owner, self.open = client, limit, per_owner, 0
        self.held_by: dict[str, int] = {}

    def take(self, owner: str = ANONYMOUS) -> None:
        """One slot for `owner`, or a 429 naming the limit or the quota (given back with `give_back`)."""
        if self.per_owner is not None and self.held_by.get(owner, 0) >= self.per_owner:
            raise QuotaReached("stream_slots", self.per_owner, owner)
        if self.open >= self.limit:
            raise BadRequest(429, f"this server has {self.limit} streams and waits open, its limit: retry later",
                             headers={"Retry-After": str(RETRY_AFTER_S)})
        self.open += 1
        self.held_by[owner] = self.held_by.get(owner, 0) + 1
        _HOLDER.set(owner)

    def give_back(self) -> None:
        """The slot this request holds."""
        owner = _HOLDER.get()
        if owner is None:
            return
        _HOLDER.set(None)
        self.open = max(0, self.open - 1)
        left = self.held_by.get(owner, 1) - 1
        if left > 0:
            self.held_by[owner] = left
        else:
            self.held_by.pop(owner, None)

    @asynccontextmanager
    async def held(self, owner: str = ANONYMOUS) -> AsyncIterator[None]:
        self.take(owner)
        try:
            yield
        finally:
            self.give_back()
