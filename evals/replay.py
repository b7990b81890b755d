"""`compare --replay DIR`: a recorded comparison made again from the replies kept beside its results, with no
provider asked (models/reply_tape.py plays them back).

The runs are made again one at a time under the recorded settings, each answered with its own recorded replies,
so each ends as it ended then and the report's tables come out the same. What a replay cannot make again is kept
as recorded: a run stopped at its time limit or by the cost cap (the reply it waited for never came), and the wall
time and finish time of every run (a replay measures no provider).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reactgraph.errors import ReactGraphError
from reactgraph.evals.faults import FaultPlan
from reactgraph.evals.outcomes import CUT, TIMED_OUT
from reactgraph.evals.results_file import RESULTS, SETTINGS, read_records, record_key, suite_fingerprint
from reactgraph.evals.runner import RunConfig, run_key, tape_run
from reactgraph.evals.tasks import Task, load_suite
from reactgraph.models.reply_tape import REPLIES, Tape

# The settings of run.json a RunConfig takes back (the rest say how the runs were scheduled, or what they were).
CONFIG_FIELDS = ("graphs", "model", "repeat", "seed", "seeds", "max_iterations", "reflection", "protocol",
                 "max_tool_calls", "max_model_tokens", "max_cost_usd", "max_output_tokens")
MEASURED = ("wall_s", "finished_at")  # what a replay keeps of the recording: it measures no provider
# The process settings that decide which requests a run makes (how often a failed one is sent again, which form a
# structured one takes) and how a failure reads (a timeout's line names it): kept in run.json, and set again for a
# replay, so that it asks what the recording asked and its records say what the recording's said.
REQUEST_SETTINGS = ("REACTGRAPH_MODEL_RETRIES", "REACTGRAPH_NODE_RETRIES", "REACTGRAPH_TOOL_CHOICE",
                    "REACTGRAPH_STRUCTURED_OUTPUT", "REACTGRAPH_MODEL_TIMEOUT")


class ReplayError(ReactGraphError, ValueError):
    """A folder that cannot be replayed: no run, no replies, or a suite that changed since."""


@dataclass(frozen=True)
class Replay:
    """What a replay makes again: the recorded settings, records and tasks, the config and the tape."""

    folder: Path
    settings: dict[str, Any]
    recorded: list[dict[str, Any]]
    tasks: list[Task]
    config: RunConfig
    tape: Tape

    @property
    def carried(self) -> list[dict[str, Any]]:
        """The records kept as recorded: runs stopped at their time limit or by the cost cap, or made without a
        tape (a run older than the replies file)."""
        return [r for r in self.recorded if r.get("status") in (TIMED_OUT, CUT) or not r.get("replies")]

    def as_recorded(self, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The replayed records with the recording's measures of time (wall time, finish time)."""
        measured = {record_key(r): {k: r.get(k) for k in MEASURED} for r in self.recorded}
        return [{**r, **measured.get(record_key(r), {})} for r in records]


def load_replay(folder: Path) -> Replay:
    """The recorded comparison in `folder`, ready to be made again from its replies."""
    settings = _settings(folder)
    recorded, _ = read_records(folder / RESULTS)
    if not recorded:
        raise ReplayError(f"--replay {folder}: no run record in {RESULTS}")
    if not (folder / REPLIES).is_file():
        raise ReplayError(f"--replay {folder}: no {REPLIES}: the runs were recorded without their replies")
    suite = load_suite(str(settings.get("suite") or "default"))
    if settings.get("suite_sha") and suite_fingerprint(suite) != settings["suite_sha"]:
        raise ReplayError(f"--replay {folder}: suite {settings.get('suite')!r} has changed since the recording")
    wanted = {str(r["task"]) for r in recorded}
    tasks = [t for t in suite if t.id in wanted]
    config = RunConfig(**{k: settings[k] for k in CONFIG_FIELDS if k in settings} | {
        "graphs": tuple(settings.get("graphs") or ()), "faults": FaultPlan(**(settings.get("faults") or {}))})
    attempts = {tape_run(str(r["graph"]), run_key(int(r.get("seed") or 0), str(r["task"]),
                                                   int(r.get("repeat") or 0))): str(r["replies"])
                for r in recorded if r.get("replies")}
    return Replay(folder, settings, recorded, tasks, config, Tape.replay(folder, attempts))


def request_settings() -> dict[str, str]:
    """This process's REQUEST_SETTINGS that are set, for run.json."""
    return {name: os.environ[name] for name in REQUEST_SETTINGS if os.environ.get(name)}


def apply_request_settings(settings: dict[str, Any]) -> None:
    """The recording's REQUEST_SETTINGS in this process's environment (run.json is a file: only the allowed names,
    short values); a name the recording did not set is unset."""
    recorded = settings.get("request_settings")
    recorded = recorded if isinstance(recorded, dict) else {}
    for name in REQUEST_SETTINGS:
        value = recorded.get(name)
        if isinstance(value, str) and 0 < len(value) <= 40:
            os.environ[name] = value
        else:
            os.environ.pop(name, None)


def _settings(folder: Path) -> dict[str, Any]:
    try:
        data = json.loads((folder / SETTINGS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise ReplayError(f"--replay {folder}: no readable {SETTINGS}: not a comparison's folder") from None
    if not isinstance(data, dict) or not isinstance(data.get("graphs"), list) or not data.get("model"):
        raise ReplayError(f"--replay {folder}: {SETTINGS} does not hold a comparison's settings")
    return data
