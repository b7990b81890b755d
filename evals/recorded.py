"""A comparison kept in a results directory: the notebooks' runs, so that their tables and figures come from
results files (`python .ci/update-notebooks` re-makes them from the committed ones, running nothing).

`recorded_comparison(tasks, config)` runs as `run_comparison` does when $REACTGRAPH_RESULTS_DIR is unset. When it
is set, each comparison has a directory of its own there, named by the model and a hash of every setting that
identifies it (the `compare --resume` settings, the tasks' contents, seeds and repeats): the runs already in its
results.jsonl are read, not made again, and the rest are made and appended as they finish, as `compare --resume`
does.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel

from reactgraph.evals.results_file import (
    IDENTITY,
    RESULTS,
    SETTINGS,
    open_results,
    ordered,
    record_key,
    rewrite_results,
    suite_fingerprint,
)
from reactgraph.evals.runner import RunConfig, compare_runs, run_comparison
from reactgraph.evals.tasks import Task

RESULTS_DIR_ENV = "REACTGRAPH_RESULTS_DIR"
# Settings that joined the identity after results were committed: named in the hash only when set, so the
# directories made before them keep their names.
SET_ONLY = ("max_output_tokens",)


def results_directory(tasks: list[Task], config: RunConfig, root: Path) -> tuple[Path, dict[str, Any]]:
    """The directory of this comparison under `root`, and the settings its run.json holds."""
    settings = {**config.describe(), "suite": f"{len(tasks)} selected tasks", "suite_sha": suite_fingerprint(tasks)}
    identity = {key: settings.get(key) for key in (*IDENTITY, "seed_values", "repeat")
                if key not in SET_ONLY or settings.get(key) is not None}
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:12]
    return root / f"{re.sub(r'[^A-Za-z0-9._-]+', '_', config.model)}-{digest}", settings


def recorded_comparison(tasks: list[Task], config: RunConfig, model: BaseChatModel | None = None,
                        root: str | Path | None = None) -> list[dict[str, Any]]:
    """`run_comparison`, kept in (and read from) a results directory under `root` ($REACTGRAPH_RESULTS_DIR)."""
    root = root or os.environ.get(RESULTS_DIR_ENV, "").strip()
    if not root:
        return run_comparison(tasks, config, model=model)
    out, settings = results_directory(tasks, config, Path(root))
    writer, done = open_results(out, settings, resume=(out / SETTINGS).is_file())
    (out / SETTINGS).touch()  # used now: .ci/update-notebooks removes the directories no notebook uses any more
    with writer:
        outcome = compare_runs(tasks, config, writer.append, model, done)
    if outcome.new:  # in report order, so the committed file does not change with the order runs finished in
        kept = {record_key(r): r for r in done} | {record_key(r): r for r in outcome.records}
        rewrite_results(out / RESULTS, ordered(kept.values(), list(config.graphs)))
    return outcome.records
