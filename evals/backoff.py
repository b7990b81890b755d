"""A pause before new runs start while the provider is refusing: bounded, and never a second retry of a call.

The model layer already retries each call (the provider SDK: 408/409/429/5xx and refused connections with
exponential backoff, honouring Retry-After up to a minute, REACTGRAPH_MODEL_RETRIES times; then the nodes'
RetryPolicy re-runs the node, REACTGRAPH_NODE_RETRIES times, models/gateway.py). A run whose call
still fails ends `failed` with the provider's one-line cause and is recorded so: it is not run again. What the
eval adds is run-wide: after such a failure no new run starts for a while (2 s, doubling per failure in a row
up to 60 s; a run that ends otherwise resets it), so N concurrent runs do not all spend their retries on a
provider that is rate-limiting or down.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any

FIRST_PAUSE_S = 2.0
MAX_PAUSE_S = 60.0
# The causes the model layer words for a provider that refused or failed (models/loader.describe_model_error).
_PROVIDER_TROUBLE = re.compile(r"model provider error: (?:(?:408|409|429|5\d\d) |cannot connect|no reply)")


def provider_trouble(record: dict[str, Any]) -> bool:
    """The run failed because the provider refused or failed (after every retry of the model layer)."""
    return bool(_PROVIDER_TROUBLE.search(str(record.get("error") or "")))


class StartGate:
    """When the next run may start: at once, or after a pause that doubles with each provider failure in a row."""

    def __init__(self, first_s: float = FIRST_PAUSE_S, max_s: float = MAX_PAUSE_S) -> None:
        self.first_s, self.max_s = first_s, max_s
        self.failures = 0
        self.open_at = 0.0
        self._lock = threading.Lock()

    def observe(self, record: dict[str, Any]) -> None:
        with self._lock:
            if not provider_trouble(record):
                self.failures = 0
                return
            pause = min(self.first_s * 2 ** self.failures, self.max_s)
            self.failures += 1
            self.open_at = max(self.open_at, time.monotonic() + pause)

    def wait_s(self) -> float:
        """Seconds until a run may start (0: now)."""
        return max(0.0, self.open_at - time.monotonic())
