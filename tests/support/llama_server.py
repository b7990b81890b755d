"""llama.cpp's `llama-server` serving SmolLM2-135M-Instruct on loopback, from the cache that
tests/real_model/prepare.py fills: for the real-model tier, the cassette recorder and benchmarks/real_model.py.

    with llama_server() as base_url:     # http://127.0.0.1:<port>; the OpenAI API is under /v1
        ...

The server generates at most `MAX_REPLY_TOKENS` per reply to a request that names no `max_tokens` (a request's own
limit replaces it; a degenerate reply is cut there with `finish_reason: "length"`), in a context of
`CONTEXT_TOKENS`, deterministic at temperature 0, on `THREADS` threads. Its log goes to a file beside the cache,
read back when it fails to start.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from support.local_servers import free_port

CACHE = Path(os.environ.get("REACTGRAPH_REAL_MODEL_CACHE") or Path.home() / ".cache/reactgraph/real-model")
SERVER = CACHE / "bin/llama-server"
MODEL = CACHE / "SmolLM2-135M-Instruct.gguf"
TEMPLATE = CACHE / "qwen2.5-tools.jinja"
MODEL_NAME = "smollm2-135m-instruct"
CONTEXT_TOKENS = 4096
MAX_REPLY_TOKENS = 128
STARTUP_TIMEOUT_S = 60.0
# One thread unless told: on a machine whose cores other jobs share, llama.cpp's threads wait on each other (two
# threads generated 0.7-1.5 tokens/s where one made 7-10, load ≈ 9 on 2 cores, 2026-12-02).
THREADS = int(os.environ.get("REACTGRAPH_REAL_MODEL_THREADS") or 1)


def missing() -> list[Path]:
    """The cache's files that are not there yet (run tests/real_model/prepare.py)."""
    return [path for path in (SERVER, MODEL, TEMPLATE) if not path.exists()]


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


@contextmanager
def llama_server(threads: int = THREADS) -> Iterator[str]:
    """Start the server on a free loopback port, wait (bounded) until /health says the model is loaded, yield its
    base URL; stop it on the way out."""
    if missing():
        raise RuntimeError(f"the real-model tier is not prepared ({', '.join(map(str, missing()))} missing): "
                           "run `python tests/real_model/prepare.py`")
    port = free_port()
    log = CACHE / f"llama-server-{port}.log"
    command = [str(SERVER), "-m", str(MODEL), "--jinja", "--chat-template-file", str(TEMPLATE),
               "--host", "127.0.0.1", "--port", str(port), "-c", str(CONTEXT_TOKENS), "-n", str(MAX_REPLY_TOKENS),
               "--threads", str(threads), "--parallel", "1", "--alias", MODEL_NAME]
    url = f"http://127.0.0.1:{port}"
    with log.open("wb") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not _healthy(url):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"llama-server did not become healthy in {STARTUP_TIMEOUT_S:g} s:\n"
                                   + log.read_text(errors="replace")[-3000:])
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.unlink(missing_ok=True)
