"""What the operator decided for one service, read once at start: the langgraph.json given with `--config`
(its `auth`, `http` and `reactgraph` sections, and `checkpointer.ttl`) and the serve/worker flags.

The operator is trusted, a client is not (README "Security model"): everything a request may choose is bounded
by what this object says. Each section is parsed by the module that enforces it; this module only reads the
file and hands the sections out, so a bad file is one line before anything starts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reactgraph.errors import ReactGraphError

if TYPE_CHECKING:  # each section's module reads its own part of the config from here: the types only
    from reactgraph.service.auth import AuthSettings
    from reactgraph.service.http_guard import HttpSettings
    from reactgraph.service.quotas import Quotas
    from reactgraph.service.retention import Retention
    from reactgraph.service.run_request import RunPolicy


class BadServerConfig(ReactGraphError, ValueError):
    """A langgraph.json (or flag) the service cannot start with; the message names the file and the setting."""


@dataclass(frozen=True)
class LanggraphConfig:
    """A langgraph.json's sections as plain JSON (empty when no file was given)."""

    path: Path | None = None
    sections: dict[str, Any] = field(default_factory=dict)

    def section(self, name: str) -> dict[str, Any]:
        """The object under `name` ({} when absent); anything but an object there is a BadServerConfig."""
        value = self.sections.get(name)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise BadServerConfig(f"{self.path}: {name!r} must be an object, not {type(value).__name__}")
        return value


def read_langgraph_config(path: Path | None) -> LanggraphConfig:
    """The langgraph.json at `path` (None: no file, every section empty)."""
    if path is None:
        return LanggraphConfig()
    try:
        sections = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BadServerConfig(f"cannot read {path}: {exc}") from None
    if not isinstance(sections, dict):
        raise BadServerConfig(f"{path}: a langgraph.json is a JSON object, not {type(sections).__name__}")
    return LanggraphConfig(path, sections)


@dataclass(frozen=True)
class ServerSettings:
    """Everything `build_app` and the workers need to know of the operator's choices, beyond Redis and tools.

    Each field is owned by the module that enforces it (built from `LanggraphConfig` plus flags):
    - `auth`: who may call and what they may see (reactgraph/service/auth.py); None only on loopback or --no-auth;
    - `run_policy`: what a client's run `context`/`config` may choose (reactgraph/service/run_request.py);
    - `http`: allowed Host headers, CORS, body, stream and timeout limits (reactgraph/service/http_guard.py);
    - `retention`: the thread sweep (reactgraph/service/retention.py);
    - `quotas`: what one caller may keep or hold (reactgraph/service/quotas.py); None: the defaults;
    - `ui`: whether the debugger page is served at /ui (reactgraph/ui/page.py);
    - `ui_results`: the folder of `reactgraph compare` outputs the page shows (reactgraph/ui/comparisons.py).
    """

    auth: AuthSettings | None = None
    run_policy: RunPolicy | None = None
    http: HttpSettings | None = None
    retention: Retention | None = None
    quotas: Quotas | None = None
    ui: bool = False
    ui_results: Path | None = None
