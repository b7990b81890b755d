"""The state's typed records stay plain dicts a checkpoint stores and loads, and older checkpoints read back."""

from __future__ import annotations

from reactgraph.memory.redis_checkpoint.serde import AllowListSerializer
from reactgraph.models.gateway import Usage
from reactgraph.nodes.closing import Coverage
from reactgraph.nodes.state import (
    Approvals,
    Budget,
    ReflectionVerdict,
    approvals_of,
    budget_stopped,
    has_failed,
    iteration_of,
    steps_of,
    usage_of,
    verdict_of,
)


def test_records_are_plain_dicts_the_allow_list_serializer_round_trips():
    verdict = ReflectionVerdict(enough_information=True, tool_error=False, need_other_tool=False,
                                repeated_call=False, note="n", parts=["a"], missing=[]).record()
    values = {"reflection": verdict, "coverage": Coverage(["a", "b"], ["b"], "model").record(),
              "approvals": Approvals(message_id="m1", approved=["c1"], notes={"c1": "edited"}),
              "usage": Usage(tool_calls=2, cost_usd=0.5), "budget": Budget(kind="max_tool_calls", limit=2, used=2)}
    serde = AllowListSerializer()
    for value in values.values():
        assert type(value) is dict
        assert serde.loads_typed(serde.dumps_typed(value)) == value
    assert verdict == {"enough_information": True, "tool_error": False, "need_other_tool": False,
                       "repeated_call": False, "note": "n", "parts": ["a"], "missing": []}


def test_a_verdict_from_an_older_checkpoint_reads_with_the_defaults():
    old = {"enough_information": False, "tool_error": True, "need_other_tool": True, "repeated_call": True,
           "note": "x"}  # written before the verdict named the question's parts
    verdict = verdict_of({"reflection": old})
    assert verdict is not None and verdict["repeated_call"] and verdict["parts"] == [] and verdict["missing"] == []
    assert verdict_of({}) is None and verdict_of({"reflection": None}) is None


def test_absent_and_reset_fields_read_as_their_defaults():
    for state in ({}, {"iteration": None, "steps": None, "usage": None, "approvals": None, "status": None}):
        assert iteration_of(state) == 0 and steps_of(state) == [] and usage_of(state) == {}
        assert approvals_of(state) is None and not has_failed(state) and not budget_stopped(state)
    assert has_failed({"status": "failed"}) and budget_stopped({"stop_reason": "budget"})
