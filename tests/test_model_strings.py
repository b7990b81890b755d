"""Model strings as LangChain's `init_chat_model` takes them, wherever the project names a model (Context.model,
`--model`, fallbacks, langgraph.json, the service's allow-list): the project's own specs, bare OpenAI and
Anthropic names, and `<provider>:<model>` for the providers `init_chat_model` loads."""

from __future__ import annotations

import sys

import pytest
from langchain_core.messages import HumanMessage

from reactgraph.graph import Context, ModelConfigError, build_react_graph, load_chat_model, parse_spec
from reactgraph.models.loader import canonical_spec
from reactgraph.service.run_request import PolicyRefusal, RunPolicy
from reactgraph.tools import ToolGateway
from support.provider_server import ProviderServer, point_at, text


@pytest.mark.parametrize(("spec", "provider", "canonical"), [
    ("openai:gpt-4o-mini", "openai", "openai:gpt-4o-mini"),
    ("gpt-4o", "openai", "openai:gpt-4o"),
    ("o3-mini", "openai", "openai:o3-mini"),
    ("claude-sonnet-4-6", "anthropic", "anthropic:claude-sonnet-4-6"),
    ("ollama:llama3.1:8b", "ollama", "ollama:llama3.1:8b"),
    ("google_genai:gemini-2.5-flash", "google_genai", "google_genai:gemini-2.5-flash"),
    ("offline", "offline", "offline"),
])
def test_a_spec_names_its_provider_as_init_chat_model_would(spec: str, provider: str, canonical: str) -> None:
    assert parse_spec(spec)[0] == provider and canonical_spec(spec) == canonical


@pytest.mark.parametrize(("spec", "words"), [
    ("llama", "unknown model spec 'llama'"),  # a bare name of a provider we cannot tell
    ("nosuch:model", "unknown model provider 'nosuch'"),  # refused when read, not at the first run
    ("Open AI:gpt", "unknown model spec"),
])
def test_a_spec_no_provider_can_load_is_refused_when_read(spec: str, words: str) -> None:
    with pytest.raises(ModelConfigError, match=words):
        parse_spec(spec)


def test_a_provider_whose_package_is_absent_is_one_line_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "langchain_mistralai", None)  # absent, whatever this machine has installed
    with pytest.raises(ModelConfigError, match=r"mistralai:mistral-large-latest needs its LangChain package.*"
                                               r"langchain-mistralai"):
        load_chat_model("mistralai:mistral-large-latest")


def test_a_bare_openai_name_runs_on_the_projects_client(monkeypatch: pytest.MonkeyPatch) -> None:
    with ProviderServer(text("Hello.")) as server:
        point_at(monkeypatch, server, "openai")
        result = build_react_graph(tools=[]).invoke({"messages": [HumanMessage("hi")]},
                                                    context=Context(model="gpt-4o-mini", closing_check=False))
    assert result["final_answer"] == "Hello." and server.requests[0]["model"] == "gpt-4o-mini"
    assert server.requests[0]["max_tokens"] > 0  # the project's bound, which a bare init_chat_model would not send


def test_the_services_allow_list_takes_either_spelling_of_a_listed_model() -> None:
    policy, gateway = RunPolicy(models=("openai:gpt-4o-mini",)), ToolGateway()
    assert policy.run_context({"model": "gpt-4o-mini"}, gateway)["model"] == "gpt-4o-mini"
    with pytest.raises(PolicyRefusal, match="not offered"):
        policy.run_context({"model": "gpt-4o"}, gateway)
