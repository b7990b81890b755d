"""`reactgraph serve` cancelling runs as langgraph-api does: the thread reads as its worker will leave it as soon
as `runs.cancel` returns, a run that is no longer pending or running is a 404, and deleting an assistant cancels
its runs — through langgraph-sdk's client against a real server and workers on the test Redis."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from langgraph_sdk.errors import NotFoundError

from test_serve import Service, human, start_service, stop, wait_for

SLOW = "广州的天气怎么样？"  # its weather call takes SLOW_S seconds: the run is running until it is stopped


@pytest.fixture(scope="module")
def served(redis_url: str, tmp_path_factory) -> Iterator[Service]:
    service = start_service(redis_url, tmp_path_factory.mktemp("cancel"), SLOW_CITIES="广州", SLOW_S="60")
    yield service
    stop(service)


def _running(client, thread_id: str, assistant: str = "react", question: str = SLOW) -> dict:
    run = client.runs.create(thread_id, assistant, input=human(question))
    wait_for(lambda: client.runs.get(thread_id, run["run_id"])["status"] == "running", 30, "the run running")
    return run


def _settled(served: Service, thread_id: str) -> str:
    """The thread's status once its worker has let it go (the thread's `active` key in Redis is gone: a rolled-back
    run cannot be joined, it no longer exists)."""
    import redis

    from reactgraph.service.keys import ServiceKeys

    active = ServiceKeys(served.env["REACTGRAPH_SERVICE_PREFIX"]).active(thread_id)
    with redis.Redis.from_url(served.env["REDIS_URL"]) as db:
        wait_for(lambda: not db.exists(active), 30, "the worker letting the thread go")
    return served.client().threads.get(thread_id)["status"]


# -- the thread at once ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("action", ["interrupt", "rollback"])
def test_a_cancelled_runs_thread_reads_at_once_what_its_worker_leaves_it_as(served, action):
    client = served.client()
    thread = client.threads.create()["thread_id"]
    if action == "rollback":  # a turn before: what the thread goes back to
        client.runs.wait(thread, "react", input=human("计算 2 + 3 等于多少"))
    run = _running(client, thread)
    assert client.threads.get(thread)["status"] == "busy"
    client.runs.cancel(thread, run["run_id"], action=action)
    at_once = client.threads.get(thread)
    assert at_once["status"] != "busy"
    assert _settled(served, thread) == at_once["status"]  # no flip once the worker has stopped it
    # stopped inside `act` (as langgraph dev leaves it, the checkpoint has a next node); rolled back, as before it
    assert at_once["status"] == ("interrupted" if action == "interrupt" else "idle")
    assert client.threads.get(thread)["interrupts"] == at_once["interrupts"] == {}


def _statuses_until_done(client, thread_id: str, run_id: str) -> list[str]:
    """The thread's status read again and again until the run has ended (a read takes a few milliseconds)."""
    seen: list[str] = []
    for _ in range(3000):
        seen.append(client.threads.get(thread_id)["status"])
        if client.runs.get(thread_id, run_id)["status"] not in ("pending", "running"):
            break
    assert client.runs.get(thread_id, run_id)["status"] == "success"
    return seen


def _busy_then_idle(seen: list[str]) -> bool:
    """From the first `busy`: busy until the last run ends, then idle (the thread is written before its run's end,
    so it may read idle while that run finishes)."""
    started = seen[seen.index("busy"):]
    ended = started.index("idle") if "idle" in started else len(started)
    return set(started[:ended]) == {"busy"} and set(started[ended:]) <= {"idle"}


def test_a_thread_with_another_run_waiting_stays_busy_and_runs_it(served):
    # The worker that stops the cancelled run writes the thread's status after it, unless a run waits: that run is
    # the thread's work. (It wrote `interrupted` for the few milliseconds before it started the next one.)
    client = served.client()
    thread = client.threads.create()["thread_id"]
    first = _running(client, thread)
    queued = client.runs.create(thread, "react", input=human("计算 2 + 3 等于多少"))
    client.runs.cancel(thread, first["run_id"])
    seen = _statuses_until_done(client, thread, queued["run_id"])
    assert seen[0] == "busy" and _busy_then_idle(seen), seen
    assert "5" in client.runs.join(thread, queued["run_id"])["final_answer"]
    assert client.threads.get(thread)["status"] == "idle"


def test_a_thread_reads_busy_from_one_runs_end_to_the_next_while_runs_wait(served):
    client = served.client()
    thread = client.threads.create()["thread_id"]
    first = client.runs.create(thread, "react", input=human("计算 2 + 3 等于多少"))
    waiting = client.runs.create(thread, "react", input=human("计算 3 + 4 等于多少"), multitask_strategy="enqueue")
    seen = _statuses_until_done(client, thread, waiting["run_id"])
    assert client.runs.get(thread, first["run_id"])["status"] == "success"
    assert seen[0] == "busy" and _busy_then_idle(seen), seen  # busy from runs.create, as on the Agent Server


def test_a_thread_reads_busy_from_runs_create_until_its_waiting_runs_are_cancelled_or_deleted(redis_url, tmp_path):
    service = start_service(redis_url, tmp_path, workers=0)  # nothing runs: the runs wait
    try:
        client = service.client()
        thread = client.threads.create()["thread_id"]
        first = client.runs.create(thread, "react", input=human("计算 2 + 3 等于多少"))
        assert client.threads.get(thread)["status"] == "busy"
        second = client.runs.create(thread, "react", input=human("计算 3 + 4 等于多少"), multitask_strategy="enqueue")
        client.runs.cancel(thread, first["run_id"])
        assert client.threads.get(thread)["status"] == "busy", "another run waits"
        client.runs.delete(thread, second["run_id"])
        assert client.threads.get(thread)["status"] == "idle"
        assert thread not in {t["thread_id"] for t in client.threads.search(status="busy", limit=1000)}
        assert thread in {t["thread_id"] for t in client.threads.search(status="idle", limit=1000)}  # its index too
    finally:
        stop(service)


def test_a_cancel_at_any_moment_of_a_runs_start_never_leaves_the_thread_busy(served):
    client = served.client()
    thread = client.threads.create()["thread_id"]
    for _ in range(6):  # the cancel lands before, during or after the worker takes the run: never `busy` after it
        run = client.runs.create(thread, "react", input=human(SLOW))
        client.runs.cancel(thread, run["run_id"])
        at_once = client.threads.get(thread)["status"]
        assert at_once != "busy"
        assert _settled(served, thread) == at_once


# -- what cannot be cancelled -----------------------------------------------------------------------------------

def test_cancelling_a_run_that_is_neither_pending_nor_running_is_a_404_in_one_line(served):
    client = served.client()
    thread = client.threads.create()["thread_id"]
    client.runs.wait(thread, "react", input=human("计算 2 + 3 等于多少"))
    (done,) = client.runs.list(thread)
    with pytest.raises(NotFoundError):
        client.runs.cancel(thread, done["run_id"])
    with pytest.raises((NotFoundError, httpx.HTTPStatusError)) as refused:  # the sdk raises either
        client.runs.cancel(thread, done["run_id"], wait=True)
    assert refused.value.response.status_code == 404
    running = _running(client, thread)
    queued = client.runs.create(thread, "react", input=human("计算 10 * 7 等于多少"))
    url = f"{served.url}/threads/{thread}/runs"
    assert httpx.post(f"{url}/{queued['run_id']}/cancel", timeout=30).status_code == 202  # pending: as langgraph dev
    assert httpx.post(f"{url}/{running['run_id']}/cancel", timeout=30).status_code == 202
    again = httpx.post(f"{url}/{running['run_id']}/cancel", timeout=30)  # already cancelled: interrupted
    assert again.status_code == 404
    detail = again.json()["detail"]
    assert "\n" not in detail and running["run_id"] in detail and "neither pending nor running" in detail
    assert client.runs.get(thread, done["run_id"])["status"] == "success"  # nothing changed by the refusals
    _settled(served, thread)


# -- deleting an assistant ---------------------------------------------------------------------------------------

def test_deleting_an_assistant_cancels_its_pending_and_running_runs_and_no_others(served):
    client = served.client()
    made = client.assistants.create("react", context={"max_iterations": 3}, name="to be deleted")
    thread, other = client.threads.create()["thread_id"], client.threads.create()["thread_id"]
    running = _running(client, thread, made["assistant_id"])
    queued = client.runs.create(thread, made["assistant_id"], input=human("计算 2 + 3 等于多少"))
    bystander = _running(client, other)  # the graph's own assistant: not the deleted one's
    client.assistants.delete(made["assistant_id"])
    assert client.runs.get(thread, running["run_id"])["status"] == "interrupted"
    assert client.runs.get(thread, queued["run_id"])["status"] == "interrupted"
    assert client.threads.get(thread)["status"] != "busy"
    assert client.runs.get(other, bystander["run_id"])["status"] == "running"
    assert _settled(served, thread) == "interrupted"
    assert client.runs.get(thread, queued["run_id"])["status"] == "interrupted"  # never started
    client.runs.cancel(other, bystander["run_id"])
    _settled(served, other)


def test_a_run_whose_first_cancellation_is_swallowed_is_still_stopped():
    """Once the watcher has seen the cancel mark, the run's task is cancelled until it ends: a cancellation that
    lands inside a redis-py asyncio command can be swallowed there (redis/redis-py#2028), and the run would then
    go on into its next tool call (here: a second sleep of a minute)."""
    import asyncio
    import contextlib

    from reactgraph.service.worker import stop_task

    async def swallows_one() -> None:
        with contextlib.suppress(asyncio.CancelledError):  # as such a command may
            await asyncio.sleep(60)
        await asyncio.sleep(60)

    async def scenario() -> None:
        task = asyncio.create_task(swallows_one())
        await asyncio.sleep(0)  # it waits in its first sleep
        await asyncio.wait_for(stop_task(task), 5)
        assert task.cancelled()

    asyncio.run(scenario())
