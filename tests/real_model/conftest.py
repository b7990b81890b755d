"""The real-model tier's server: one llama-server (SmolLM2-135M-Instruct) for the session, behind a recording
proxy that counts each run's requests. Run with `python -m pytest -m real_model tests/real_model` after
`python tests/real_model/prepare.py`; the main suite leaves these tests out (pyproject's `-m "not real_model"`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from support.llama_server import MODEL_NAME, llama_server, missing
from support.recording_proxy import RecordingProxy

MODEL = f"openai:{MODEL_NAME}"


@pytest.fixture(scope="session")
def real_model() -> Iterator[RecordingProxy]:
    """The proxy in front of the running server: OPENAI_BASE_URL is `proxy.openai_url`."""
    if missing():  # failing, not skipping: a tier asked for and not run would pass unseen
        pytest.fail("the real-model tier is not prepared: run `python tests/real_model/prepare.py`", pytrace=False)
    with llama_server() as url, RecordingProxy(url) as proxy:
        yield proxy


@pytest.fixture
def model_env(real_model: RecordingProxy, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The environment that points `openai:` models (in this process and in a subprocess) at the real model."""
    env = {"REACTGRAPH_MODEL": MODEL, "OPENAI_BASE_URL": real_model.openai_url, "OPENAI_API_KEY": "not-needed"}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env
