"""`reactgraph.create_agent`: LangChain's `create_agent` signature, returning the explicit ReAct graph.

The drop-in test runs the first program of LangChain's agent docs twice, as written, once with LangChain's
import and once with ours, with the real Anthropic client against a local Messages API server (no network):
the same program, unchanged but for the import, answers through our loop."""

from __future__ import annotations

import importlib.util
from typing import Any, NotRequired

import pytest
from langchain.agents import AgentState
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver

from reactgraph import Context, create_agent
from reactgraph.graph.create_agent import CreateAgentError
from reactgraph.testing import ScriptedChatModel
from support.provider_server import ProviderServer, calls, closing_check, point_at, text, verdict

if importlib.util.find_spec("langchain_anthropic") is None:  # found, not imported (tests/test_anthropic_client.py)
    pytest.skip("the anthropic extra is not installed", allow_module_level=True)

# LangChain's agent quickstart (docs.langchain.com, "Agents"), as published; only its first line differs.
PROGRAM = '''
{import_line}

def get_weather(city: str) -> str:
    """Get weather for a given city."""
    return f"It's always sunny in {{city}}!"

agent = create_agent(
    model="claude-sonnet-4-6",
    tools=[get_weather],
    system_prompt="You are a helpful assistant",
)

# Run the agent
result = agent.invoke(
    {{"messages": [{{"role": "user", "content": "what is the weather in sf"}}]}}
)
'''


@pytest.fixture
def anthropic_server(monkeypatch: pytest.MonkeyPatch):
    return lambda server: point_at(monkeypatch, server, "anthropic")


def run_program(import_line: str) -> dict[str, Any]:
    scope: dict[str, Any] = {}
    exec(PROGRAM.format(import_line=import_line), scope)  # the documented program, verbatim
    return scope["result"]


def test_langchains_quickstart_runs_unchanged_after_the_import_swap(anthropic_server):
    with ProviderServer(calls(("get_weather", {"city": "sf"})), text("It's always sunny in sf.")) as theirs:
        anthropic_server(theirs)
        expected = run_program("from langchain.agents import create_agent")
    with ProviderServer(calls(("get_weather", {"city": "sf"})), verdict(True, note="The tool answered it."),
                        text("It's always sunny in sf."), closing_check(["the weather in sf"])) as ours:
        anthropic_server(ours)
        result = run_program("from reactgraph import create_agent")
    assert ours.rejections == [] and theirs.rejections == []
    assert result["messages"][-1].text == expected["messages"][-1].text == "It's always sunny in sf."
    assert (result["status"], result["final_answer"]) == ("answered", "It's always sunny in sf.")
    assert [s["observation"] for s in result["steps"] if s["node"] == "act"] == ["It's always sunny in sf!"]
    # the same model by name, the agent's instructions first in the agent's system prompt, the tool offered
    think = ours.requests[0]
    assert think["model"] == theirs.requests[0]["model"] == "claude-sonnet-4-6"
    assert think["system"].startswith("You are a helpful assistant\n\n") and ours.tool_names(0) == ["get_weather"]


class Noted(AgentState):
    note: NotRequired[str]


class MyContext(Context):
    user_name: str = "ada"


def test_state_and_context_schemas_interrupts_and_a_model_string_of_its_own():
    model = ScriptedChatModel(replies=["Hello, ada."])
    agent = create_agent(model, system_prompt=SystemMessage("Greet the user by name."), state_schema=Noted,
                         context_schema=MyContext, checkpointer=InMemorySaver(), interrupt_after=["model"],
                         name="greeter")
    config = {"configurable": {"thread_id": "t"}}
    agent.invoke({"messages": [HumanMessage("hi")], "note": "kept"}, config, context=MyContext(closing_check=False))
    assert agent.get_state(config).next and agent.name == "greeter"  # stopped after think ("model")
    state = agent.invoke(None, config, context=MyContext(closing_check=False))
    assert (state["final_answer"], state["note"]) == ("Hello, ada.", "kept")
    assert model.requests[0].messages[0].text.startswith("Greet the user by name.\n\n")
    assert isinstance(create_agent("offline").invoke({"messages": [HumanMessage("1+2=?")]})["messages"][-1],
                      AIMessage)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"transformers": [object()]}, "transformers= .* has no counterpart"),
    ({"context_schema": dict}, "context_schema=dict: this graph's nodes read reactgraph.Context"),
    ({"tools": [{"type": "web_search"}]}, "a provider's built-in tool \\('web_search'\\)"),
    ({"interrupt_before": ["nowhere"]}, "interrupt at 'nowhere': no such node"),
    ({"model": "nosuchprovider:some-model"}, "model='nosuchprovider:some-model'"),
])
def test_what_it_cannot_honour_is_refused_in_one_line(kwargs: dict[str, Any], message: str):
    arguments: dict[str, Any] = {"model": ScriptedChatModel(replies=["x"]), **kwargs}
    with pytest.raises(CreateAgentError, match=message):
        create_agent(**arguments)
