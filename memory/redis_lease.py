"""The Redis side of `session_lease` and `asession_lease`: take, renew and release `<prefix>{<session>}:lease`.

The key sits in the session's hash slot (the checkpoint keys' `{<session>}` tag), so a Redis Cluster keeps a
session's lease beside its checkpoints. Its value is `<random token>\\0<since, ms>\\0<owner>`: the token
proves ownership (renew and release compare it inside a script), the rest tells a waiting user who holds it.
Both renew from a thread of their own — `AsyncRedisLeases` too, over a sync twin of its asyncio client (the same
server, its own connections) — so a busy or blocked event loop (a CPU-bound tool, a slow synchronous call) cannot
starve the renewals and let another worker take a session whose turn is still running.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import secrets
import socket
import threading
import time
import weakref
from datetime import UTC, datetime
from typing import Any

import redis
import redis.asyncio

from reactgraph.memory.redis_checkpoint.cluster_wire import connection_kwargs
from reactgraph.memory.redis_checkpoint.errors import CheckpointStoreUnavailable, client_url, unavailable
from reactgraph.memory.redis_checkpoint.layout import normalise_prefix, thread_base
from reactgraph.memory.redis_checkpoint.limits import PoolLimits, answer_wait
from reactgraph.memory.session_lease import LeaseHolder, SessionLease

log = logging.getLogger("reactgraph.memory.lease")
_DOWN = (redis.ConnectionError, redis.TimeoutError, OSError, redis.exceptions.ClusterError)
_OWNER = re.compile(r"pid \d{1,10} on [A-Za-z0-9._-]{1,64}")  # what new_value writes; anything else is not shown
_MAX_VALUE = 512  # bytes of a lease value read back: it is Redis content, so bounded and never trusted

# Both compare the whole value, so only the holder that wrote it can extend or delete it.
_RENEW = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0"
_RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"


class RedisLease(SessionLease):
    """A lease held in Redis, and what stops its renewals (a thread's event, or an asyncio task) on release."""

    def __init__(self, session: str, ttl_s: float, key: str, value: str, sent: float) -> None:
        super().__init__(session, "redis", ttl_s)
        self.key, self.value = key, value
        self.valid_until = sent + ttl_s  # SET PX counts from when Redis ran it, which is after we sent it
        self.stopped = threading.Event()

    @property
    def ttl_ms(self) -> int:
        return max(1, round(self.ttl_s * 1000))

    def renewed(self, sent: float, outcome: Any) -> bool:
        """Take one renewal's outcome (the script's reply, or the error it raised); False once the lease is lost.

        A failed renewal is retried at the next beat (a timeout or a dropped connection may pass) until the
        lease would have run out; meanwhile `lost` already says so once the last confirmed expiry is past."""
        if isinstance(outcome, Exception):
            if time.monotonic() < self.valid_until:
                log.warning("session %s: lease renewal failed, retried at the next beat (%s)", self.session,
                            _first_line(outcome), extra={"redis": {
                                "event": "lease_renewal_failed", "session": self.session,
                                "error": f"{type(outcome).__name__}: {_first_line(outcome)}"}})
                return True
            self.lost_reason = f"Redis did not answer its renewal for {self.ttl_s:g} s: {_first_line(outcome)}"
            self._log_lost()
            return False
        if not outcome:
            self.lost_reason = "it expired before it was renewed"
            self._log_lost()
            return False
        self.valid_until = sent + self.ttl_s
        return True


    def _log_lost(self) -> None:
        log.error("session %s: lease lost: %s", self.session, self.lost_reason,
                  extra={"redis": {"event": "lease_lost", "session": self.session, "error": self.lost_reason}})


class _LeaseRules:
    """What both sides share: the key, the value written, and the one-line error of an unreachable Redis."""

    scope = "redis"
    client: Any
    prefix: str
    url: str

    def key(self, session: str) -> str:
        return thread_base(self.prefix, session) + "lease"

    @staticmethod
    def new_value() -> str:
        return f"{secrets.token_hex(16)}\0{int(time.time() * 1000)}\0pid {os.getpid()} on {_host()}"

    def down(self, exc: BaseException) -> CheckpointStoreUnavailable:
        pool = getattr(self.client, "connection_pool", None)  # a RedisCluster has a pool per node
        wait = answer_wait(pool) if pool is not None else connection_kwargs(self.client).get("socket_timeout")
        return unavailable(self.url, exc, wait)


class RedisLeases(_LeaseRules):
    """Session leases on one Redis (a sync client), under the checkpointer's key prefix."""

    def __init__(self, client: redis.Redis, prefix: str = "reactgraph", *, owns_client: bool = False) -> None:
        self.client, self.prefix, self._owns_client = client, normalise_prefix(prefix), owns_client
        self.url = client_url(client)
        self._renew = client.register_script(_RENEW)
        self._release = client.register_script(_RELEASE)

    @classmethod
    def from_url(cls, url: str, prefix: str = "reactgraph") -> RedisLeases:
        from reactgraph.memory.redis_checkpoint.pool import new_client

        return cls(new_client(url, {}, PoolLimits.resolve(None, None), False), prefix, owns_client=True)

    def try_acquire(self, session: str, ttl_s: float) -> tuple[SessionLease | None, LeaseHolder | None]:
        """The lease if the session is free (SET NX PX), else who holds it."""
        key, value, sent = self.key(session), self.new_value(), time.monotonic()
        try:
            if self.client.set(key, value, nx=True, px=max(1, round(ttl_s * 1000))):
                lease = RedisLease(session, ttl_s, key, value, sent)
                self.start_renewing(lease)
                return lease, None
            held = self.client.getrange(key, 0, _MAX_VALUE - 1)
        except _DOWN as exc:
            raise self.down(exc) from exc
        return None, parse_holder(held) if held else None

    def start_renewing(self, lease: RedisLease) -> None:
        """Renew `lease` from a daemon thread of its own until it is released (`lease.stopped`) or lost."""
        threading.Thread(target=self._heartbeat, args=(lease,), name=f"session-lease {lease.session[:40]}",
                         daemon=True).start()

    def _heartbeat(self, lease: RedisLease) -> None:
        """Renew every third of the expiry until released or lost."""
        while not lease.stopped.wait(lease.ttl_s / 3):
            sent = time.monotonic()
            try:
                outcome = self._renew(keys=[lease.key], args=[lease.value, lease.ttl_ms])
            except Exception as exc:  # noqa: BLE001 - any failed renewal is retried until the expiry
                outcome = exc
            if not lease.renewed(sent, outcome):
                return

    def release(self, lease: SessionLease) -> None:
        """Stop renewing and delete the lease if it is still ours (else it expires by itself)."""
        assert isinstance(lease, RedisLease)
        lease.stopped.set()
        # Redis gone: the lease expires on its own, and the turn's own error says what happened.
        with contextlib.suppress(*_DOWN):
            self._release(keys=[lease.key], args=[lease.value])

    def close(self) -> None:
        if self._owns_client:
            self.client.close()


class AsyncRedisLeases(_LeaseRules):
    """The same leases for asyncio callers: taken and released on a redis.asyncio client (or a sync one driven
    from worker threads), so the event loop never blocks; renewed from a thread, over the client's sync twin."""

    def __init__(self, client: Any, prefix: str = "reactgraph", *, owns_client: bool = False) -> None:
        self.client, self.prefix, self._owns_client = client, normalise_prefix(prefix), owns_client
        self.url = client_url(client)
        self._on_loop = isinstance(client, (redis.asyncio.Redis, redis.asyncio.RedisCluster))
        self._release = client.register_script(_RELEASE)
        self._renewer = RedisLeases(sync_twin(client) if self._on_loop else client, self.prefix)

    @classmethod
    def from_url(cls, url: str, prefix: str = "reactgraph") -> AsyncRedisLeases:
        from reactgraph.memory.redis_checkpoint.pool import new_client

        return cls(new_client(url, {}, PoolLimits.resolve(None, None), True), prefix, owns_client=True)

    async def _call(self, function: Any, *args: Any, **kwargs: Any) -> Any:
        if self._on_loop:
            return await function(*args, **kwargs)
        return await asyncio.to_thread(function, *args, **kwargs)

    async def try_acquire(self, session: str, ttl_s: float) -> tuple[SessionLease | None, LeaseHolder | None]:
        key, value, sent = self.key(session), self.new_value(), time.monotonic()
        try:
            if await self._call(self.client.set, key, value, nx=True, px=max(1, round(ttl_s * 1000))):
                lease = RedisLease(session, ttl_s, key, value, sent)
                self._renewer.start_renewing(lease)
                return lease, None
            held = await self._call(self.client.getrange, key, 0, _MAX_VALUE - 1)
        except _DOWN as exc:
            raise self.down(exc) from exc
        return None, parse_holder(held) if held else None

    async def release(self, lease: SessionLease) -> None:
        assert isinstance(lease, RedisLease)
        lease.stopped.set()  # the renewing thread ends at its next wake-up, without a renewal
        with contextlib.suppress(*_DOWN):
            await self._call(self._release, keys=[lease.key], args=[lease.value])

    async def close(self) -> None:
        if self._owns_client:
            await self.client.aclose()


# asyncio client -> its sync twin; the twin's connections close when the asyncio client is collected
_TWINS: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
_TWINS_LOCK = threading.Lock()


def sync_twin(client: Any) -> Any:
    """A sync redis-py client to the same server(s) as a redis.asyncio one, with the same connection settings
    (TLS, credentials, timeouts) and connections of its own, for the lease-renewing threads. One per client."""
    with _TWINS_LOCK:
        twin = _TWINS.get(client)
        if twin is None:
            twin = _TWINS[client] = _new_twin(client)
            weakref.finalize(client, twin.close)
        return twin


def _new_twin(client: Any) -> Any:
    if isinstance(client, redis.asyncio.RedisCluster):
        from redis.cluster import ClusterNode

        nodes = [ClusterNode(node.host, node.port) for node in client.get_nodes()] or [
            ClusterNode(*hostport.rsplit(":", 1)) for hostport in client.nodes_manager.startup_nodes]
        kwargs = {k: v for k, v in client.nodes_manager.connection_kwargs.items()
                  if k not in ("host", "port", "connection_class", "connection_pool_class")}
        return redis.RedisCluster(startup_nodes=nodes, **kwargs)
    pool = client.connection_pool
    # redis.asyncio.SSLConnection -> redis.SSLConnection, and so on: the kwargs are the same for both
    kind = getattr(redis.connection, pool.connection_class.__name__, redis.connection.Connection)
    # Blocking: renewals of many leases at once wait for a free connection instead of failing with "too many"
    return redis.Redis(connection_pool=redis.BlockingConnectionPool(connection_class=kind, max_connections=8,
                                                                    timeout=5, **pool.connection_kwargs))


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname())[:64] or "unknown-host"


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]


def parse_holder(raw: Any) -> LeaseHolder:
    """Who holds a lease, from its (untrusted, size-bounded) value; what is not as we write it is left out."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    parts = text.split("\0")
    since = None
    if len(parts) >= 2 and parts[1].isdigit() and len(parts[1]) <= 15:
        since = datetime.fromtimestamp(int(parts[1]) / 1000, UTC)
    owner = parts[2] if len(parts) >= 3 and _OWNER.fullmatch(parts[2]) else ""
    return LeaseHolder(since, owner)
