"""One log record for every fallback a node takes (a summary, a reflection, a plan, a lesson, a judgement
made by the rules because the model's failed; a malformed reply sent back; a model error that ends the turn):
what would otherwise happen silently. The CLI shows them (`--debug`, `--log-format`); see reactgraph/cli/logs.py."""

from __future__ import annotations

import logging

from reactgraph.models.gateway import describe

logger = logging.getLogger("reactgraph.nodes")
__all__ = ["describe", "log_fallback"]  # describe: the gateway's one line for an exception


def log_fallback(node: str, kind: str, reason: str | BaseException, *, level: int = logging.WARNING) -> None:
    """Record that `node` fell back (`kind`: summary_rules, reflection_rules, plan_one_step, …) and why; an
    exception's traceback goes along at DEBUG."""
    if not logger.isEnabledFor(level):
        return
    why = describe(reason) if isinstance(reason, BaseException) else str(reason)[:300]
    exc_info = reason if isinstance(reason, BaseException) and logger.isEnabledFor(logging.DEBUG) else None
    logger.log(level, "%s fell back: %s (%s)", node, kind, why, exc_info=exc_info,
               extra={"fallback": {"node": node, "kind": kind, "reason": why}})
