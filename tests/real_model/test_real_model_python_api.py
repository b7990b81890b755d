"""Each graph, in one protocol or the other, through the Python API, on the real small model: the run ends with a
status its evidence supports, within bounded requests and time, with its tokens counted. Whether the answer is
right is not checked: a 135M-parameter model is mostly wrong."""

from __future__ import annotations

import time

import pytest

from support.real_model_runs import REQUEST_BOUND, RUN_CEILING_S, TIER_SCENARIOS, problems, run
from support.recording_proxy import truncated

pytestmark = [pytest.mark.real_model, pytest.mark.timeout(2 * RUN_CEILING_S)]


@pytest.mark.parametrize("scenario", TIER_SCENARIOS, ids=[s.name for s in TIER_SCENARIOS])
def test_a_compiled_graph_on_the_real_model_ends_as_its_evidence_says(scenario, real_model, model_env):
    mark = real_model.mark()
    started = time.monotonic()
    result = run(scenario, model_env["REACTGRAPH_MODEL"])
    wall = time.monotonic() - started
    exchanges = real_model.since(mark)
    assert problems(result, len(exchanges), REQUEST_BOUND[scenario.graph], truncated(exchanges)) == []
    assert wall < RUN_CEILING_S
