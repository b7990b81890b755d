"""The Redis side of `session_lease`: take, renew and release `<prefix>{<session>}:lease`.

The key sits in the session's hash slot (the checkpoint keys' `{<session>}` tag), so a Redis Cluster keeps a
session's lease beside its checkpoints. Its value is `<random token>\\0<since, ms>\\0<owner>`: the token
proves ownership (renew and release compare it inside a script), the rest tells a waiting user who holds it.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import socket
import threading
import time
from datetime import UTC, datetime
from typing import Any

import redis

from reactgraph.memory.redis_checkpoint.errors import client_url, unavailable
from reactgraph.memory.redis_checkpoint.layout import normalise_prefix, thread_base
from reactgraph.memory.session_lease import LeaseHolder, SessionLease

_DOWN = (redis.ConnectionError, redis.TimeoutError, OSError)
_OWNER = re.compile(r"pid \d{1,10} on [A-Za-z0-9._-]{1,64}")  # what try_acquire writes; anything else is not shown
_MAX_VALUE = 512  # bytes of a lease value read back: it is Redis content, so bounded and never trusted

# Both compare the whole value, so only the holder that wrote it can extend or delete it.
_RENEW = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0"
_RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"


class RedisLease(SessionLease):
    """A lease held in Redis, with the heartbeat thread that renews it until it is released."""

    def __init__(self, session: str, ttl_s: float, key: str, value: str) -> None:
        super().__init__(session, "redis", ttl_s)
        self.key, self.value = key, value
        self.stopped = threading.Event()


class RedisLeases:
    """Session leases on one Redis, under the checkpointer's key prefix."""

    scope = "redis"

    def __init__(self, client: redis.Redis, prefix: str = "reactgraph", *, owns_client: bool = False) -> None:
        self.client, self.prefix, self._owns_client = client, normalise_prefix(prefix), owns_client
        self.url = client_url(client)
        self._renew = client.register_script(_RENEW)
        self._release = client.register_script(_RELEASE)

    @classmethod
    def from_url(cls, url: str, prefix: str = "reactgraph") -> RedisLeases:
        from reactgraph.memory.redis_checkpoint.limits import PoolLimits
        from reactgraph.memory.redis_checkpoint.pool import new_client

        return cls(new_client(url, {}, PoolLimits.resolve(None, None), False), prefix, owns_client=True)

    def key(self, session: str) -> str:
        return thread_base(self.prefix, session) + "lease"

    def try_acquire(self, session: str, ttl_s: float) -> tuple[SessionLease | None, LeaseHolder | None]:
        """The lease if the session is free (SET NX PX), else who holds it."""
        key, ttl_ms = self.key(session), max(1, round(ttl_s * 1000))
        value = f"{secrets.token_hex(16)}\0{int(time.time() * 1000)}\0pid {os.getpid()} on {_host()}"
        try:
            if self.client.set(key, value, nx=True, px=ttl_ms):
                lease = RedisLease(session, ttl_s, key, value)
                threading.Thread(target=self._heartbeat, args=(lease,), name=f"session-lease {session[:40]}",
                                 daemon=True).start()
                return lease, None
            held = self.client.getrange(key, 0, _MAX_VALUE - 1)
        except _DOWN as exc:
            raise unavailable(self.url, exc) from exc
        return None, parse_holder(held) if held else None

    def _heartbeat(self, lease: RedisLease) -> None:
        """Renew every third of the expiry; a failed renewal retries until the lease would have run out."""
        ttl_ms = max(1, round(lease.ttl_s * 1000))
        expires = time.monotonic() + lease.ttl_s
        while not lease.stopped.wait(lease.ttl_s / 3):
            try:
                renewed = self._renew(keys=[lease.key], args=[lease.value, ttl_ms])
            except (*_DOWN, redis.RedisError) as exc:
                if time.monotonic() >= expires:
                    lease.lost_reason = f"Redis did not answer its renewal for {lease.ttl_s:g} s: {exc}"
                    return
                continue
            if not renewed:
                lease.lost_reason = "it expired before it was renewed"
                return
            expires = time.monotonic() + lease.ttl_s

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


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname())[:64] or "unknown-host"


def parse_holder(raw: Any) -> LeaseHolder:
    """Who holds a lease, from its (untrusted, size-bounded) value; what is not as we write it is left out."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    parts = text.split("\0")
    since = None
    if len(parts) >= 2 and parts[1].isdigit() and len(parts[1]) <= 15:
        since = datetime.fromtimestamp(int(parts[1]) / 1000, UTC)
    owner = parts[2] if len(parts) >= 3 and _OWNER.fullmatch(parts[2]) else ""
    return LeaseHolder(since, owner)
