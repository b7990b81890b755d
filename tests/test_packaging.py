"""The wheel as a user installs it: every module and data file of the repository's layer folders lands under the
one `reactgraph` namespace, and the CLI and the Python API work beside PyPI's `tools`, `graph-theory` and `nodes`
(which install top-level `tools`, `graph` and `nodes`, the names our folders had before the namespace)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from support.cli_env import clean_env
from support.local_servers import free_port

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("graph", "nodes", "models", "tools", "memory", "evals")
# Pinned, so the test always meets the same files; all three are small pure-Python wheels.
NEIGHBOURS_FILE = ROOT / "tests" / "data" / "pypi-neighbours.txt"
NEIGHBOURS = tuple(line.strip() for line in NEIGHBOURS_FILE.read_text().splitlines()
                   if line.strip() and not line.startswith("#"))
# one worker builds the wheel once for both tests and alone fills the download cache
pytestmark = pytest.mark.xdist_group("packaging")


def installed_env(**extra: str) -> dict[str, str]:
    """`clean_env` without PYTHONPATH: a test run with PYTHONPATH=<checkout> must still meet the installed wheel."""
    env = clean_env(**extra)
    env.pop("PYTHONPATH", None)
    return env


def run(*command: str | Path, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([str(part) for part in command], capture_output=True, text=True, timeout=timeout,
                            cwd=cwd, env=installed_env(PIP_DISABLE_PIP_VERSION_CHECK="1"))
    assert result.returncode == 0, f"{command} failed:\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The project's wheel, built once from the working tree."""
    # from a copy of what the build reads: setuptools builds in the source tree, and a build/ left there from an
    # earlier build would ship modules that the repository no longer has
    source, out = tmp_path_factory.mktemp("source"), tmp_path_factory.mktemp("wheel")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, source)
    for folder in ("reactgraph", *LAYERS):
        shutil.copytree(ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__"))
    run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", source, "-w", out, cwd=out, timeout=300)
    (built,) = out.glob("react_graph-*.whl")
    return built


def neighbour_wheels(request: pytest.FixtureRequest, scratch: Path) -> Path:
    """PyPI's `tools`, `graph-theory` and `nodes` wheels. CI downloads them with its other installs (the test
    itself then talks to no one); a developer's first run downloads them once into pytest's cache."""
    if prefetched := os.environ.get("REACTGRAPH_TEST_NEIGHBOURS"):
        return Path(prefetched)
    cache = getattr(request.config, "cache", None)  # none under -p no:cacheprovider
    folder = cache.mkdir("pypi-neighbours") if cache is not None else scratch / "pypi-neighbours"
    if len(list(folder.glob("*.whl"))) < len(NEIGHBOURS):
        run(sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:", "-d", folder,
            *NEIGHBOURS, cwd=scratch)
    return folder


def wheel_names(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as archive:
        return set(archive.namelist())


def test_the_wheel_holds_every_module_and_data_file_of_the_layer_folders(wheel):
    names = wheel_names(wheel)
    assert "reactgraph/studio/langgraph.json" in names  # what `reactgraph studio` serves outside a checkout
    assert {"reactgraph/ui/static/index.html", "reactgraph/ui/static/app.js"} <= names  # the debugger page
    expected = set()
    for folder in ("reactgraph", *LAYERS):
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                relative = path.relative_to(ROOT).as_posix()
                expected.add(relative if folder == "reactgraph" else f"reactgraph/{relative}")
    assert {"reactgraph/py.typed", "reactgraph/cli/app.py", "reactgraph/evals/suites/default.jsonl",
            "reactgraph/tools/builtin/data/weather.json"} <= expected  # the walk found the tree
    assert expected - names == set(), "missing from the wheel (add the package to [tool.setuptools] packages)"
    extra = {name for name in names if not name.startswith("react_graph-")} - expected
    assert extra == set(), "the wheel holds files the layer folders do not (or top-level names besides reactgraph)"
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names)


@dataclass(frozen=True)
class Installed:
    venv: Path
    site: Path  # its site-packages, where the wheel and PyPI's neighbours are

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory, request) -> Installed:
    """A fresh venv that sees this environment's packages through a .pth file (so nothing else is downloaded),
    with PyPI's neighbours and the wheel installed into it."""
    tmp_path = tmp_path_factory.mktemp("installed")
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp_path)
    python = venv / "bin" / "python"
    purelib = "import sysconfig; print(sysconfig.get_path('purelib'))"
    site = Path(run(python, "-c", purelib, cwd=tmp_path).stdout.strip())
    (site / "_outer_environment.pth").write_text(sysconfig.get_path("purelib") + "\n")
    pip = (sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-index", "--no-deps")
    run(*pip, "--find-links", neighbour_wheels(request, tmp_path), *NEIGHBOURS, cwd=tmp_path)
    run(*pip, "--force-reinstall", wheel, cwd=tmp_path)
    return Installed(venv, site)


def test_beside_pypis_tools_graph_theory_and_nodes_the_cli_and_the_api_work(installed, tmp_path):
    # run from a folder away from the repository
    venv, site, python = installed.venv, installed.site, installed.python
    for name in ("tools", "graph", "nodes"):
        assert (site / name).is_dir() or (site / f"{name}.py").is_file(), f"PyPI's {name} is not installed"

    reactgraph = venv / "bin" / "reactgraph"
    assert "ask" in run(reactgraph, "--help", cwd=tmp_path).stdout
    asked = json.loads(run(reactgraph, "ask", "计算 2+3", "--store", "memory", "--json", cwd=tmp_path).stdout)
    assert asked["status"] == "answered" and "5" in asked["answer"]

    api = run(python, "-c", """
import importlib.util, json, reactgraph
from langchain_core.messages import HumanMessage
from reactgraph.graph import build_react_graph
result = build_react_graph().invoke({"messages": [HumanMessage("计算 2+3")]})
print(json.dumps({"answer": result["final_answer"], "reactgraph": reactgraph.__file__,
                  "neighbours": [importlib.util.find_spec(name).origin for name in ("graph", "nodes", "tools")]}))
""", cwd=tmp_path)
    report = json.loads(api.stdout.strip().splitlines()[-1])
    assert "5" in report["answer"]
    assert Path(report["reactgraph"]).is_relative_to(site), "the API ran the repository, not the installed wheel"
    assert all(Path(path).is_relative_to(site) for path in report["neighbours"])  # PyPI's top-level names are there



def test_the_installed_reactgraph_studio_serves_its_packaged_config_from_any_directory(installed, tmp_path, redis_url):
    # no langgraph.json here, and no checkout: the wheel's own config, module paths into the installed package
    port = free_port()
    log_file = tmp_path / "studio.log"
    env = installed_env(REDIS_URL=redis_url, REACTGRAPH_MODEL="offline", PYTHONUNBUFFERED="1")
    with log_file.open("w") as log:
        process = subprocess.Popen([installed.venv / "bin" / "reactgraph", "studio", "--port", str(port)], cwd=tmp_path,
                                   env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline, ready = time.monotonic() + 90, False
        while not ready and time.monotonic() < deadline and process.poll() is None:
            try:
                ready = httpx.get(f"http://127.0.0.1:{port}/ok", timeout=2).status_code == 200
            except httpx.HTTPError:
                time.sleep(0.25)
        logs = log_file.read_text()
        assert ready, f"reactgraph studio did not serve within 90 s:\n{logs}"
        graphs = httpx.post(f"http://127.0.0.1:{port}/assistants/search", json={}, timeout=10).json()
        assert {a["graph_id"] for a in graphs} == {"react", "plan_solve", "reflexion"}
        packaged = installed.site / "reactgraph" / "studio" / "langgraph.json"
        assert f"config: the packaged {packaged} (no langgraph.json in {tmp_path.resolve()})" in logs
        assert "threads: Redis redis://" in logs
    finally:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


