"""`reactgraph serve` on the real small model, driven by langgraph-sdk: a run on the served graph ends with a
status its evidence supports, its usage in the run's output, within bounded requests."""

from __future__ import annotations

import pytest

from support.real_model_runs import MAX_ITERATIONS, REQUEST_BOUND, RUN_CEILING_S, WEATHER, problems
from support.recording_proxy import truncated
from test_serve import human, start_service, stop

pytestmark = [pytest.mark.real_model, pytest.mark.timeout(3 * RUN_CEILING_S)]


@pytest.mark.parametrize(("graph", "protocol"), [("plan_solve", "tools")])
def test_a_served_run_on_the_real_model_ends_as_its_evidence_says(graph, protocol, real_model, model_env, redis_url,
                                                                  tmp_path):
    service = start_service(redis_url, tmp_path, workers=1, **model_env)
    try:
        client = service.client()
        thread = client.threads.create()
        mark = real_model.mark()
        final = client.runs.wait(thread["thread_id"], graph, input=human(WEATHER),
                                 context={"protocol": protocol, "max_iterations": MAX_ITERATIONS})
        exchanges = real_model.since(mark)
        assert problems(final, len(exchanges), REQUEST_BOUND[graph], truncated(exchanges)) == []
    finally:
        stop(service)
