"""Shared fixtures: a Redis to share breaker state through, a clock the tests move by hand, and a guard that
keeps every test's traffic on this machine."""

from __future__ import annotations

import gc
import os
import signal
import uuid

import pytest
import redis

from support import cpu_report, outbound

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/15"


class FakeClock:
    """Wall time that only moves when a test says so, so cool-downs pass without sleeping."""

    def __init__(self, start: float = 1_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


outbound.refuse()  # every DNS query or connection off loopback fails, and is recorded (below)

# A young collection every 5,000 allocations, not every 700. A test worker holds the whole suite's imports (LangGraph,
# LangChain, the SDKs, their pydantic models): its collections took 4-7 s of CPU per run (2026-12-06: 3,200-5,600 young
# and 11-15 full ones per worker); at 5,000 they took 2-5 s, half the total. (Freezing the heap after
# collection did not help: full collections came more often, as costly.) Only the test processes: the commands they
# start keep Python's defaults.
gc.set_threshold(5000, 10, 10)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--cpu-report", nargs="?", const="", default=None, metavar="DIR",
                     help="print the CPU each test module took (its workers', the processes it started); the "
                          "figures go to DIR, a new temporary folder if none is given (support/cpu_report.py). "
                          "Write --cpu-report=DIR: pytest reads a DIR after a space as a path to test, before it "
                          "knows this option")


def pytest_configure(config: pytest.Config) -> None:
    cpu_report.configure(config)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """A worker's heap frozen once its tests are done. After the session pytest collects garbage "harder" (ten full
    collections, to surface unraisable exceptions), over a heap holding the whole suite's imports: 3-6 s of CPU per
    worker at 2 cores' full use after its last test (2026-12-06), for warnings a worker can no longer report
    (its results are sent). Frozen, they look at nothing: the run ends ≈ 5 s sooner. The same for the process that
    hands tests to the workers and runs none: its two rounds over the 2,500 reports took 0.6 s at the very end."""
    if os.environ.get("PYTEST_XDIST_WORKER") or session.config.pluginmanager.has_plugin("dsession"):
        gc.freeze()


# A suite started in the background (`python -m pytest &` from a script, as CI runners may) inherits SIGINT
# ignored, and so would every process its tests start: a test pressing Ctrl-C on `reactgraph ask` or stopping
# `reactgraph studio` with it would find the process deaf and fail. Python's own SIGINT handler again here, so
# the processes the tests start (exec resets a handled signal) get the default a terminal gives them.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def no_outbound_traffic():
    """A test that tried to resolve or reach a host other than loopback fails, even if it caught the error."""
    outbound.attempts()
    yield
    tried = outbound.attempts()
    assert not tried, f"the test tried to leave the machine: {tried}; mock the transport or DNS instead"


# Modules whose tests share a module fixture that is slow to build (the Studio dev server, the wheel): under
# pytest-xdist each runs on one worker, so it is built once. (xdist's own `xdist_group` mark does this, but
# with pytest 9.2 it is silently ignored: pytest-dev/pytest-xdist#1386.)
# The modules whose module fixture is a `reactgraph serve` (with its workers, and for some MCP servers: 1.3 s of
# CPU or more to start) are among them: spread test by test over three workers, each was started up to 3 times.
SERVICE_MODULES = ("tests/test_serve.py", "tests/test_serve_runs.py", "tests/test_serve_auth.py",
                   "tests/test_serve_http_guard.py", "tests/test_serve_policy.py", "tests/test_serve_nonblocking.py",
                   "tests/test_serve_assistants.py", "tests/test_serve_assistants_auth.py")
ONE_WORKER_MODULES = ("tests/test_studio.py", "tests/test_packaging.py", "tests/test_mcp.py",
                      "tests/test_redis_cluster.py",  # test_redis_cluster starts a three-node Redis Cluster once
                      "tests/test_debugger_ui.py",  # one `reactgraph ui` and one browser session for its tests
                      "tests/test_compare_replay.py",  # one recorded comparison, replayed by each test
                      "tests/test_task_families.py",  # the 50 family tasks through three graphs, once
                      *SERVICE_MODULES)
# Modules whose tests mostly wait (for a server's lease to lapse, a client's retry, a stuck tool's deadline) run as one
# unit too. Spread test by test, all the workers were in one of them at once and the cores idled: the suite's CPU use
# fell to 50-75 % for 10-30 s at a time (2026-12-06). As units, one worker waits while the others work.
WAITING_MODULES = ("tests/test_serve_faults.py", "tests/test_security_sessions.py", "tests/test_serve_run_ends.py",
                   "tests/test_anthropic_client.py", "tests/test_openai_client.py", "tests/test_eval_plumbing.py",
                   "tests/test_bounded_requests.py", "tests/test_serve_params.py", "tests/test_eval_runs.py",
                   "tests/test_serve_cancel.py", "tests/test_security_load.py")
# At most this many workers wait in them at once: the others' tests keep the cores busy.
MAX_WAITING_AT_ONCE = 2
# The units, longest first (their tests' wall time on one worker, 2026-12-06: 48 s down to 7 s): handed out first,
# a long unit never starts last, to run on alone after the rest is done.
UNITS = ("tests/test_redis_cluster.py", "tests/test_serve_faults.py", "tests/test_studio.py",
         "tests/test_security_sessions.py", "tests/test_debugger_ui.py", "tests/test_serve_run_ends.py",
         "tests/test_serve_http_guard.py", "tests/test_packaging.py", "tests/test_serve_nonblocking.py",
         "tests/test_anthropic_client.py", "tests/test_eval_plumbing.py", "tests/test_openai_client.py",
         "tests/test_eval_runs.py", "tests/test_serve_cancel.py", "tests/test_security_load.py",
         "tests/test_bounded_requests.py", "tests/test_serve_params.py", "tests/test_task_families.py",
         "tests/test_serve.py", "tests/test_serve_policy.py", "tests/test_compare_replay.py",
         "tests/test_serve_assistants.py", "tests/test_mcp.py", "tests/test_serve_runs.py", "tests/test_serve_auth.py",
         "tests/test_serve_assistants_auth.py")
assert set(UNITS) == set(ONE_WORKER_MODULES) | set(WAITING_MODULES)
REAL_MODEL_TIER = "tests/real_model/"
# The longest tests (10-30 s each) start first, so no worker is left with one of them while the others idle
# (test_serve_fuzz, 9 s mostly waiting on cut-off requests, came last in file order: the cores idled for it).
LONGEST_FIRST = ("tests/test_gateway_fuzz.py", "tests/test_notebooks.py", "tests/test_serve_load.py",
                 "tests/test_serve_fuzz.py")


def pytest_ignore_collect(collection_path, config: pytest.Config) -> bool | None:
    """The real-model tier is not even collected when the run leaves it out (pyproject's `-m 'not real_model'`): each
    worker would import what only it uses, to deselect it."""
    if collection_path.name == "real_model" and config.getoption("markexpr") == "not real_model":
        return True
    return None


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: two workers more than the cores. Many tests wait — on servers they start, on a lease to expire,
    on Redis — and the extra workers run while they do (2,479 tests on 2 idle cores, 2026-12-06, whole runs in
    turn: 228 s with 4 workers against 254 s with 3, medians of three pairs, at 5 % more CPU; 5 workers cost 20 %
    more CPU for little time. An earlier suite: 4m14s with 2, 3m33s with 3; with 4 its timing-sensitive tests
    failed then, since made steady: docs/development.md)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return cores + 2


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """Test by test, as `--dist load` does, except that each of UNITS is one unit of work."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class OneWorkerModules(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            if module.startswith(REAL_MODEL_TIER):  # one llama-server for the tier, not one per worker
                return REAL_MODEL_TIER
            return module if module in UNITS else super()._split_scope(nodeid)

        # xdist's LoadScopeScheduling hangs the whole run once a worker crashes (a test past its timeout ends
        # its worker): it puts the crashed worker's *finished* units back in the queue, so a worker can be handed
        # a unit with nothing to run, and the worker that replaces the crashed one gets a single test. A worker
        # runs a test only when it holds the next one (or is told no more come), so either one waits for ever.
        def remove_node(self, node):
            """Requeue only the crashed worker's unfinished tests, without the one it crashed in (reported as
            failed, as `--dist load` does); None if it had none left."""
            workload = self.assigned_work.pop(node)
            unfinished = {scope: unit for scope, unit in workload.items() if not all(unit.values())}
            if not unfinished:
                return None
            crashed = next(nodeid for unit in unfinished.values() for nodeid, done in unit.items() if not done)
            unfinished[self._split_scope(crashed)][crashed] = True
            self.workqueue.update({scope: unit for scope, unit in unfinished.items() if not all(unit.values())})
            for other in self.assigned_work:
                self._reschedule(other)
            return crashed

        def _assign_work_unit(self, node) -> None:
            """xdist's (the next unit of the queue), except that a worker passes over the units while every other
            worker is in one, and over WAITING_MODULES while MAX_WAITING_AT_ONCE others wait in one."""
            def held(modules: tuple[str, ...]) -> int:
                return sum(any(scope in modules and not all(tests.values()) for scope, tests in work.items())
                           for other, work in self.assigned_work.items() if other is not node)

            if held(UNITS) >= len(self.assigned_work) - 1:
                self._put_first(lambda scope: scope not in UNITS)
            elif held(WAITING_MODULES) >= MAX_WAITING_AT_ONCE:
                self._put_first(lambda scope: scope not in WAITING_MODULES)
            super()._assign_work_unit(node)

        def _put_first(self, wanted) -> None:
            scope = next((scope for scope in self.workqueue if wanted(scope)), None)
            if scope is not None:
                self.workqueue.move_to_end(scope, last=False)

        def _reschedule(self, node) -> None:
            """As xdist does (one more unit while it holds at most 2 tests), then topped up to 2 tests, and told
            to finish once the queue is empty, so it never holds one test waiting for a next that never comes."""
            if node.shutting_down:
                return
            if self.workqueue and self._pending_of(self.assigned_work[node]) <= 2:
                self._assign_work_unit(node)
            while self.workqueue and self._pending_of(self.assigned_work[node]) < 2:
                self._assign_work_unit(node)
            if not self.workqueue:
                node.shutdown()

    # Work is handed out in the order of pytest_collection_modifyitems below, not by xdist's own (the units with
    # the most tests first).
    config.option.loadscopereorder = False
    return OneWorkerModules(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest tests first; then the rest in file order, with the units (UNITS, longest first) spread through
    its first three quarters, so that at any time some workers wait in a unit while the others run tests."""
    by_module: dict[str, list[pytest.Item]] = {}
    for item in items:
        by_module.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    first = [item for module in LONGEST_FIRST for item in by_module.pop(module, [])]
    units = [by_module.pop(module) for module in UNITS if module in by_module]
    rest = [item for module_items in by_module.values() for item in module_items]
    spacing = len(rest) * 3 / 4 / max(len(units), 1)  # unit k goes in before test k * spacing of the rest
    ordered, placed, previous = first, 0, None
    for index, item in enumerate(rest):
        if item.module is not previous:  # at a module's start only: a module's fixtures are built once
            while placed < len(units) and index >= placed * spacing:
                ordered += units[placed]
                placed += 1
            previous = item.module
        ordered.append(item)
    items[:] = ordered + [item for unit in units[placed:] for item in unit]


@pytest.fixture(autouse=True, scope="session")
def reactgraph_home(tmp_path_factory: pytest.TempPathFactory):
    """A temporary $REACTGRAPH_HOME for the session (under pytest-xdist, for each worker: tmp_path_factory is
    per worker): the default index and any embedded Redis a CLI run starts live there, never in the user's
    home nor in another worker's; that Redis is stopped when the session ends."""
    os.environ["REACTGRAPH_HOME"] = str(tmp_path_factory.mktemp("reactgraph-home"))
    yield
    from reactgraph.memory.embedded_redis import data_dir, stop
    stop(data_dir())


@pytest.fixture(scope="session")
def strategy_records(tmp_path_factory: pytest.TempPathFactory):
    return tmp_path_factory.mktemp("strategies")


@pytest.fixture(autouse=True)
def strategy_record(strategy_records, monkeypatch: pytest.MonkeyPatch):
    """A record of structured-output strategies (models/strategy_record.py) of this test's own: a server that
    refused json_schema in one test never changes what the next test's server is asked, nor the user's cache.
    A file name of its own in one folder: a numbered folder per test (`mktemp`) lists the worker's whole temporary
    folder to number it, which grows by a folder a test (2026-12-06: ≈ 1.5 s of CPU a worker)."""
    path = strategy_records / f"{uuid.uuid4().hex}.json"
    monkeypatch.setenv("REACTGRAPH_STRATEGY_FILE", str(path))
    return path


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(scope="session")
def redis_url() -> str:
    """REDIS_URL if set, else database 15 on the local server; a test that needs Redis fails without one."""
    url = os.environ.get("REDIS_URL") or DEFAULT_REDIS_URL
    client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)
    try:
        client.ping()
    except redis.RedisError as exc:
        # Failing, not skipping: shared breaker state is a feature, and a silent skip would hide its breakage.
        pytest.fail(f"these tests need Redis, but none answers PING at {url} ({exc}); "
                    "start one (e.g. `redis-server`) or point REDIS_URL at one", pytrace=False)
    finally:
        client.close()
    return url


@pytest.fixture
def redis_prefix(redis_url: str):
    """A key prefix of this test's own; its keys (and only those) are deleted afterwards."""
    prefix = f"reactgraph-test:{uuid.uuid4().hex}:"
    yield prefix
    client = redis.Redis.from_url(redis_url)
    try:
        keys = list(client.scan_iter(match=f"{prefix}*", count=500))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


@pytest.fixture
def cli(redis_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture):
    """Runs `reactgraph ARGS` in this process on the test Redis (offline model); (exit code, stdout, stderr)."""
    from reactgraph.cli.app import main

    for name in [n for n in os.environ if n.startswith(("REACTGRAPH_MODEL", "REACTGRAPH_TOOLS", "OPENAI_"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("REDIS_URL", redis_url)
    monkeypatch.setenv("COLUMNS", "200")

    def run(*args: str) -> tuple[int, str, str]:
        code = main(list(args))
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture
def refused_start(cli, monkeypatch: pytest.MonkeyPatch):
    """`cli` for a `reactgraph serve` or `worker` that must refuse to start: should one get as far as serving or
    working, the run fails at once (with that said) instead of serving in the test's process until its timeout."""
    import uvicorn

    from reactgraph.service import worker

    def started(*args: object, **kwargs: object) -> None:
        raise AssertionError("it started serving, where it should have refused to start")

    monkeypatch.setattr(uvicorn, "run", started)
    monkeypatch.setattr(worker, "serve_worker", started)
    return cli


@pytest.fixture
def cli_session(redis_url: str):
    """A session under the CLI's default key prefixes, removed with its long-term items afterwards."""
    from reactgraph.memory import RedisStore
    from reactgraph.memory.redis_checkpoint import RedisSaver

    name = f"sec-{uuid.uuid4().hex[:10]}"
    yield name
    with RedisSaver.from_url(redis_url) as saver:
        saver.delete_thread(name)
    with RedisStore.from_url(redis_url) as store:
        for item in store.search(("sessions", name), limit=1000):
            store.delete(item.namespace, item.key)


@pytest.fixture
def raw(redis_url: str):
    """A plain redis-py client on the test Redis, to plant or inspect keys behind the savers' backs."""
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture
def saver(redis_url: str, redis_prefix: str):
    """A RedisSaver under this test's own key prefix."""
    from reactgraph.memory.redis_checkpoint import RedisSaver

    with RedisSaver.from_url(redis_url, prefix=redis_prefix) as opened:
        yield opened


@pytest.fixture
def own_redis(tmp_path):
    """A private redis-server that a test may stop and start again (its data kept on disk): call it to start."""
    from support.local_servers import private_redis

    start, processes = private_redis(tmp_path / "redis-data")
    yield start
    for process in processes:
        process.kill()
        process.wait()


# The model specs `provider` points at the local provider server, by the API shape the server speaks.
PROVIDER_SHAPES = {"openai": ("openai:test-model", "OPENAI"), "anthropic": ("anthropic:test-model", "ANTHROPIC")}


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch):
    """`provider(server, shape="openai", retries=0, timeout=10, node_retries=0)`: this test's models talk to the
    local provider server (tests/support/provider_server.py) in that API shape, with no other REACTGRAPH_/OPENAI_/
    ANTHROPIC_ setting in the way; the client's and the nodes' retries as given (none by default: every request
    is one the graph made). Returns the model spec to use."""

    def use(server: object, shape: str = "openai", retries: int = 0, timeout: float = 10,
            node_retries: int = 0) -> str:
        for name in [n for n in os.environ if n.startswith(("REACTGRAPH_", "OPENAI_", "ANTHROPIC_"))
                     and n not in ("REACTGRAPH_HOME", "REACTGRAPH_STRATEGY_FILE", "REACTGRAPH_TEST_NEIGHBOURS")]:
            monkeypatch.delenv(name)
        model, prefix = PROVIDER_SHAPES[shape]
        url = getattr(server, "openai_url" if shape == "openai" else "anthropic_url")
        monkeypatch.setenv(f"{prefix}_BASE_URL", url)
        monkeypatch.setenv(f"{prefix}_API_KEY", "sk-test")
        monkeypatch.setenv("REACTGRAPH_MODEL_RETRIES", str(retries))
        monkeypatch.setenv("REACTGRAPH_MODEL_TIMEOUT", str(timeout))
        monkeypatch.setenv("REACTGRAPH_NODE_RETRIES", str(node_retries))
        monkeypatch.setenv("REACTGRAPH_NODE_RETRY_DELAY", "0.01")
        return model

    return use
