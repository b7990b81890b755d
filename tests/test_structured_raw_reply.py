"""A structured request's `{"raw", "parsed", "parsing_error"}` is what LangChain's `include_raw=True` answers, reply
for reply, though made without its map and fallback (models/loader.py `RawAndParsed`): the parsed schema, a reply
that fails the schema as `parsing_error`, a reply with no call as nothing parsed, and the model's own failure
raised — invoked and awaited, on the product's test model and on the real OpenAI client against a local server."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, HumanMessage
from pydantic import BaseModel

from reactgraph.models.loader import RawAndParsed, load_chat_model, structured_runnable
from reactgraph.testing import ScriptedChatModel
from support.provider_server import ProviderServer, calls


class Check(BaseModel):
    """Whether the answer is complete."""

    complete: bool
    missing: list[str]


REPLIES = {
    "parsed": AIMessage("", tool_calls=[{"name": "Check", "args": {"complete": True, "missing": []}, "id": "c1"}]),
    "fails the schema": AIMessage("", tool_calls=[{"name": "Check", "args": {"complete": "?"}, "id": "c2"}]),
    "no call": AIMessage("It is complete."),
}


def answers(runnable: Any, awaited: bool) -> dict[str, Any]:
    question = [HumanMessage("Is it complete?")]
    return asyncio.run(runnable.ainvoke(question)) if awaited else runnable.invoke(question)


def same(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    assert set(ours) == set(theirs) == {"raw", "parsed", "parsing_error"}
    assert ours["raw"].content == theirs["raw"].content and ours["raw"].tool_calls == theirs["raw"].tool_calls
    assert ours["parsed"] == theirs["parsed"]
    assert type(ours["parsing_error"]) is type(theirs["parsing_error"])
    assert str(ours["parsing_error"]) == str(theirs["parsing_error"])


@pytest.mark.parametrize("awaited", [False, True], ids=["invoke", "ainvoke"])
@pytest.mark.parametrize("reply", list(REPLIES))
def test_each_reply_reads_as_langchains_include_raw_reads_it(reply, awaited):
    ours = structured_runnable(ScriptedChatModel.of(REPLIES[reply]), Check)
    theirs = ScriptedChatModel.of(REPLIES[reply]).with_structured_output(Check, include_raw=True)
    assert isinstance(ours, RawAndParsed)
    got = answers(ours, awaited)
    same(got, answers(theirs, awaited))
    assert (got["parsed"], got["parsing_error"] is None) == {
        "parsed": (Check(complete=True, missing=[]), True), "fails the schema": (None, False),
        "no call": (None, True)}[reply]


@pytest.mark.parametrize("awaited", [False, True], ids=["invoke", "ainvoke"])
def test_the_models_own_failure_is_raised_not_reported(awaited):
    ours = structured_runnable(ScriptedChatModel.of(ConnectionError("the server went away")), Check)
    with pytest.raises(ConnectionError, match="went away"):
        answers(ours, awaited)


@pytest.mark.parametrize("awaited", [False, True], ids=["invoke", "ainvoke"])
def test_the_openai_client_gets_the_same_reading_from_a_server(awaited, monkeypatch):
    check = {"complete": False, "missing": ["the weather in Paris"]}
    with ProviderServer(calls(("Check", check))) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.openai_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("REACTGRAPH_STRUCTURED_OUTPUT", "function_calling")
        got = answers(structured_runnable(load_chat_model("openai:gpt-test"), Check), awaited)
    assert got["parsed"] == Check(**check) and got["parsing_error"] is None
    assert got["raw"].tool_calls[0]["name"] == "Check"


class SeenOptions(BaseCallbackHandler):
    """What a tracer is told of the call's options when the chat model starts."""

    def __init__(self) -> None:
        self.options: list[dict[str, Any]] = []

    def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        self.options.append(dict(kwargs.get("options") or {}))


@pytest.mark.parametrize("awaited", [False, True], ids=["invoke", "ainvoke"])
def test_tracers_are_told_the_schema_as_langchain_tells_them_made_once_not_per_call(awaited, monkeypatch):
    """The chat model reports the structured schema to its tracers as JSON schema; LangChain converts the pydantic
    class on every call, the structured runnable converts it once (it is given the JSON schema already)."""
    seen = {}
    for name, runnable in (("ours", structured_runnable(ScriptedChatModel.of(REPLIES["parsed"]), Check)),
                           ("theirs", ScriptedChatModel.of(REPLIES["parsed"]).with_structured_output(
                               Check, include_raw=True))):
        handler = SeenOptions()
        question = [HumanMessage("Is it complete?")]
        config = {"callbacks": [handler]}
        asyncio.run(runnable.ainvoke(question, config)) if awaited else runnable.invoke(question, config)
        (options,) = handler.options
        seen[name] = options["ls_structured_output_format"]
    assert seen["ours"] == seen["theirs"] and seen["ours"]["schema"]["title"] == "Check"
    converted = []
    monkeypatch.setattr(Check, "model_json_schema", classmethod(
        lambda cls, *a, **k: converted.append(cls) or BaseModel.model_json_schema.__func__(cls, *a, **k)))
    ours = structured_runnable(ScriptedChatModel.of(*[REPLIES["parsed"]] * 3), Check)
    for _ in range(3):
        answers(ours, awaited)
    assert len(converted) <= 2  # its tool's schema when bound, the tracers' once: not once more per call
