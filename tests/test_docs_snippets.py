"""Every ```python block of README.md and docs/*.md runs, so no page shows code that does not work as written.

A page's blocks run in order in one namespace (a later block may use what an earlier one on the same page made,
as a reader would type them), in a process of their own (forked from one that has imported the libraries and run
no page: `support.forked_commands`): the default offline model, no API key, a temporary
$REACTGRAPH_HOME and working directory, and the tests' Redis as $REDIS_URL (a snippet that needs Redis reads
`os.environ["REDIS_URL"]`). A top-level `await` runs on one event loop kept for the page. A block that cannot run
here (an API key, a server to talk to, code that only means something inside a node) is preceded by a visible
`<!-- not run: REASON -->` line; those are few, and each must say why.

Run one page by hand: `python tests/test_docs_snippets.py docs/python-api.md`.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from support.forked_commands import forked_run

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
NOT_RUN = re.compile(r"<!--\s*not run:\s*(?P<reason>[^>]*?)\s*-->")
THREAD_ID = re.compile(r"[\"']thread_id[\"']:\s*[\"']([^\"']+)[\"']")
FENCE = re.compile(r"^```python[ \t]*\n(?P<code>.*?)^```[ \t]*$", re.M | re.S)


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    code: str
    not_run: str | None  # the marker's reason, when the block is deliberately not run


def blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(text):
        before = text[:match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = NOT_RUN.search(before)
        found.append(Block(page, text.count("\n", 0, match.start()) + 1, match.group("code"),
                           marker.group("reason") if marker else None))
    return found


def run_page(page: Path) -> None:
    """Runs a page's runnable blocks in order in one namespace (this is what the subprocess does)."""
    namespace: dict = {"__name__": "__main__"}
    loop = asyncio.new_event_loop()
    try:
        for block in blocks(page):
            if block.not_run is not None:
                continue
            where = f"{page.relative_to(ROOT)}:{block.line}"
            print(f"--- {where}", flush=True)
            code = compile(block.code, where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
            result = eval(code, namespace)  # the block is the repository's own documentation
            if inspect.iscoroutine(result):
                loop.run_until_complete(result)
    finally:
        loop.close()


def _runnable_pages() -> list[Path]:
    return [page for page in PAGES if any(block.not_run is None for block in blocks(page))]


def _env(tmp_path: Path, redis_url: str) -> dict[str, str]:
    drop = ("OPENAI_", "ANTHROPIC_", "OTEL_", "REACTGRAPH_MODEL", "REACTGRAPH_TOOLS", "REACTGRAPH_MCP",
            "REACTGRAPH_TTL", "REACTGRAPH_INDEX", "REACTGRAPH_HTTP_", "REACTGRAPH_OTEL")
    env = {name: value for name, value in os.environ.items() if not name.startswith(drop)}
    home = tmp_path / "home"
    home.mkdir()
    env.update(REDIS_URL=redis_url, REACTGRAPH_HOME=str(home), PYTHONPATH=str(ROOT))
    return env


def _forget_threads(page: Path, redis_url: str) -> None:
    """Deletes what the page's runnable blocks left in the tests' Redis: the checkpoints of each thread id they
    name and its session's store items (the CLI's key prefixes, which the pages use)."""
    from reactgraph.memory import RedisStore
    from reactgraph.memory.redis_checkpoint import RedisSaver
    from reactgraph.memory.session_id import store_label

    code = "\n".join(block.code for block in blocks(page) if block.not_run is None)
    threads = set(THREAD_ID.findall(code))
    if not threads:
        return
    with RedisSaver.from_url(redis_url) as saver, RedisStore.from_url(redis_url) as store:
        for thread in threads:
            saver.delete_thread(thread)
            for item in store.search(("sessions", store_label(thread)), limit=1000):
                store.delete(item.namespace, item.key)


def _stop_embedded_redis(env: dict[str, str]) -> None:
    """Stops the embedded Redis a page may have started under its $REACTGRAPH_HOME; in this process, since a
    fresh interpreter only to send SHUTDOWN cost ≈ 0.6 s of CPU a page."""
    from reactgraph.memory.embedded_redis import stop

    stop(Path(env["REACTGRAPH_HOME"]) / "redis")


def test_every_page_with_python_is_checked():
    pages = {page.name for page in _runnable_pages()}
    assert "README.md" in pages and "python-api.md" in pages, pages


def test_blocks_left_out_say_why_and_are_few():
    left_out = [block for page in PAGES for block in blocks(page) if block.not_run is not None]
    for block in left_out:
        assert len(block.not_run) >= 10, f"{block.page.name}:{block.line}: say why the block is not run"
    assert len(left_out) <= 8, [f"{block.page.name}:{block.line}" for block in left_out]


def pytest_generate_tests(metafunc):
    if "page" in metafunc.fixturenames:
        pages = _runnable_pages()
        metafunc.parametrize("page", pages, ids=[str(page.relative_to(ROOT)) for page in pages])


def test_the_pages_python_runs(page: Path, tmp_path: Path, redis_url: str):
    env = _env(tmp_path, redis_url)
    try:
        done = forked_run([str(page)], env, cwd=tmp_path, timeout=110, entry="test_docs_snippets:page_main")
    finally:
        _stop_embedded_redis(env)
        _forget_threads(page, redis_url)
    assert done.returncode == 0, f"{page.relative_to(ROOT)}:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"


def page_main(argv: list[str]) -> int:
    run_page(Path(argv[0]).resolve())
    return 0


if __name__ == "__main__":
    sys.exit(page_main(sys.argv[1:]))
