"""Where the service keeps things in Redis. Every key of one thread carries the thread's hash tag — the same
`{<thread id>}` as its checkpoints and its session lease — so a Redis Cluster keeps a thread in one slot and
the scripts below may touch several of its keys at once. An assistant's record and its versions share the
hash tag `{assistant:<id>}` the same way. Only the thread and assistant indexes, the work queue and the
worker roll are global keys.
"""

from __future__ import annotations

import os

from reactgraph.memory.redis_checkpoint.layout import normalise_prefix, thread_base

DEFAULT_PREFIX = "reactgraph:svc"
PREFIX_ENV = "REACTGRAPH_SERVICE_PREFIX"  # several services (or test runs) on one Redis keep apart with it


class ServiceKeys:
    """Key names under one prefix (default: $REACTGRAPH_SERVICE_PREFIX, else `reactgraph:svc:`)."""

    def __init__(self, prefix: str | None = None) -> None:
        self.prefix = normalise_prefix(prefix or os.environ.get(PREFIX_ENV, "").strip() or DEFAULT_PREFIX)
        self.threads = f"{self.prefix}threads"  # sorted set: thread id → updated_at (ms), for listing
        self.unswept = f"{self.prefix}unswept"  # sorted set: the same, less threads the sweeper has pruned
        self.queue = f"{self.prefix}queue"      # stream: one entry per thread that has work
        self.with_work = f"{self.prefix}with-work"  # sorted set: thread id → when it was last given work (ms)
        self.scheduled = f"{self.prefix}scheduled"  # sorted set: "<thread id> <run id>" → when it is due (ms)
        self.workers = f"{self.prefix}workers"  # sorted set: worker id → last heartbeat (ms)
        self.counters = f"{self.prefix}counters"  # hash: runs finished by status, for /metrics
        self.assistants = f"{self.prefix}assistants"  # sorted set: created assistant id → created_at (ms)

    def thread(self, thread_id: str) -> str:
        return thread_base(self.prefix, thread_id) + "thread"

    def title(self, thread_id: str) -> str:
        """String: the thread's first question, as its search and the sessions list read it (titles.py)."""
        return thread_base(self.prefix, thread_id) + "title"

    def runs(self, thread_id: str) -> str:
        """Sorted set: the thread's run ids by creation time (ms)."""
        return thread_base(self.prefix, thread_id) + "runs"

    def run(self, thread_id: str, run_id: str) -> str:
        return thread_base(self.prefix, thread_id) + f"run:{run_id}"

    def pending(self, thread_id: str) -> str:
        """List: run ids waiting their turn on the thread, oldest first."""
        return thread_base(self.prefix, thread_id) + "pending"

    def active(self, thread_id: str) -> str:
        """String: the run id being executed on the thread (kept if its worker dies: the next one resumes it)."""
        return thread_base(self.prefix, thread_id) + "active"

    def scheduled_runs(self, thread_id: str) -> str:
        """Sorted set: the thread's runs waiting for their time (`after_seconds`), run id → due (ms)."""
        return thread_base(self.prefix, thread_id) + "scheduled"

    def queued(self, thread_id: str) -> str:
        """String: the id of the thread's latest token in the work queue (the sweep checks it still exists)."""
        return thread_base(self.prefix, thread_id) + "queued"

    def attempts(self, thread_id: str) -> str:
        """Hash: run id → how many times a worker has taken it (a run that keeps killing its worker is given up)."""
        return thread_base(self.prefix, thread_id) + "attempts"

    def fence(self, thread_id: str) -> str:
        """Counter: bumped each time a worker takes the thread; writes of an older holder are refused."""
        return thread_base(self.prefix, thread_id) + "fence"

    def events(self, thread_id: str, run_id: str) -> str:
        """Stream: the run's events; entry ids are the SSE event ids a client resumes from."""
        return thread_base(self.prefix, thread_id) + f"events:{run_id}"

    def cancel(self, thread_id: str, run_id: str) -> str:
        """String: "interrupt" or "rollback" once somebody asked to cancel the run."""
        return thread_base(self.prefix, thread_id) + f"cancel:{run_id}"

    def assistant(self, assistant_id: str) -> str:
        """String: a created assistant's current record (JSON)."""
        return f"{self.prefix}{{assistant:{assistant_id}}}:record"

    def assistant_versions(self, assistant_id: str) -> str:
        """Hash: version number → that version's record (JSON); versions are never removed one by one."""
        return f"{self.prefix}{{assistant:{assistant_id}}}:versions"
