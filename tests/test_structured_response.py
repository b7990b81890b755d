"""`response_format=` on every builder, as LangChain's `create_agent` takes it: the answer also in
`state["structured_response"]` (the pydantic instance, or a dict for a TypedDict or JSON schema), validated.

Through the compiled graphs: a test model keyed by purpose (`respond` fills in the schema) for every builder and
kind of schema; the real
langchain-openai client against the local OpenAI-compatible server for the provider's native structured output,
the tool strategy, a reply that does not fit (sent back with what was wrong) and one that never fits (status
no_answer, the text answer kept); checkpoints keep the response as JSON; `reactgraph ask --response-format`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from langchain.agents.structured_output import ProviderStrategy, ToolStrategy
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from reactgraph.graph import Context, build_plan_solve_graph, build_react_graph, build_reflexion_graph
from reactgraph.tools import default_gateway
from support.cli_env import run_in_process
from support.provider_server import ProviderServer, calls, point_at, structured, text
from support.scripted import by_purpose, call, verdict

QUESTION = "What is 17 * 23?"
MODEL = "openai:test-model"


class Product(BaseModel):
    """The product of two numbers."""

    answer: str = Field(description="the answer in words")
    value: float


class ProductDict(TypedDict):
    answer: str
    value: int


@dataclass
class ProductData:
    answer: str
    value: float


PRODUCT_SCHEMA = {"title": "Product", "type": "object", "required": ["answer", "value"],
                  "properties": {"answer": {"type": "string"}, "value": {"type": "number"}}}
BUILDERS = [build_react_graph, build_plan_solve_graph, build_reflexion_graph]


PRODUCTS = {QUESTION: ("17 * 23", 391), "What is 6 * 7?": ("6 * 7", 42)}


def product_model():
    """A test model for any graph and the questions of PRODUCTS: one calculator call per round or step (whatever
    the purpose: think or step), then the product; the plan is one step, every check passes, and `respond` fills in
    the schema from the answer."""
    def product(messages) -> tuple[str, int]:  # the latest message naming a question or its product
        return next(v for m in reversed(messages) for q, v in PRODUCTS.items() if q in m.text or v[0] in m.text)

    def answer(messages, info) -> str:
        expression, value = product(messages)
        return f"{expression} = {value}."

    def act(messages, info):
        if messages[-1].type == "tool":
            return answer(messages, info)
        return AIMessage("", tool_calls=[call("calculator", "c1", expression=product(messages)[0])])

    def respond(messages, info) -> dict:
        expression, value = product(messages)
        return {"answer": f"{expression} = {value}.", "value": value}

    return by_purpose(think=act, step=act, answer=answer, respond=respond, reflect=verdict(parts=["the product"]),
                      check={"parts": ["the product"], "missing": []},
                      plan=lambda messages, info: {"steps": [{"goal": f"Compute {product(messages)[0]}",
                                                              "tool": "calculator"}], "parts": ["the product"]},
                      evaluate={"passed": True, "reason": "It gives the product."})


def run(builder, response_format, *, checkpointer=None, chat_model=None, **context):
    """The question through `builder`: on `chat_model`, else the product model unless `model=` names a spec."""
    chat_model = chat_model or (None if "model" in context else product_model())
    graph = builder(default_gateway(), checkpointer=checkpointer, response_format=response_format, model=chat_model)
    return graph.invoke({"messages": [HumanMessage(QUESTION)]}, config={"configurable": {"thread_id": "t1"}},
                        context=Context(**context))


@pytest.mark.parametrize("builder", BUILDERS, ids=lambda b: b.__name__)
def test_every_graph_gives_a_pydantic_instance(builder):
    result = run(builder, Product)
    assert result["status"] == "answered" and "391" in result["final_answer"]
    assert result["structured_response"] == Product(answer=result["final_answer"], value=391)
    assert result["steps"][-1]["node"] == "respond" and result["steps"][-1]["status"] == "structured_response"


@pytest.mark.parametrize(("schema", "expected"), [
    (ProductDict, {"value": 391}), (PRODUCT_SCHEMA, {"value": 391.0}), (ProductData, None)],
    ids=["typeddict", "json_schema", "dataclass"])
def test_typeddict_and_json_schema_give_a_dict_a_dataclass_its_instance(schema, expected):
    response = run(build_react_graph, schema)["structured_response"]
    if expected is None:
        assert isinstance(response, ProductData) and response.value == 391
    else:
        assert type(response) is dict and response["value"] == expected["value"] and "391" in response["answer"]


def test_checkpoints_keep_json_and_the_state_the_instance():
    saver = InMemorySaver()
    graph = build_react_graph(default_gateway(), checkpointer=saver, response_format=Product, model=product_model())
    config = {"configurable": {"thread_id": "kept"}}
    graph.invoke({"messages": [HumanMessage(QUESTION)]}, config=config)
    assert isinstance(graph.get_state(config).values["structured_response"], Product)
    stored = saver.get_tuple(config).checkpoint["channel_values"]["structured_response"]
    assert stored == {"answer": "17 * 23 = 391.", "value": 391.0}
    # A graph without the response format (another process, `reactgraph history`) reads it as data.
    assert build_react_graph(checkpointer=saver).get_state(config).values["structured_response"] == stored
    # The next question asks again; the answer's structure is the new turn's.
    graph.invoke({"messages": [HumanMessage("What is 6 * 7?")]}, config=config)
    assert graph.get_state(config).values["structured_response"].value == 42


def test_a_bad_response_format_is_one_line_at_build_time():
    with pytest.raises(TypeError, match="response_format must be a pydantic model"):
        build_react_graph(response_format=str)
    with pytest.raises(ValueError, match="describe an object"):
        build_react_graph(response_format={"title": "N", "type": "number"})


# --- the real OpenAI client on the local server ------------------------------------------------------------


@pytest.fixture
def provider(monkeypatch):
    return lambda server: point_at(monkeypatch, server, "openai")


def on_server(response_format):
    """A ReAct run whose model answers at once (no reflection, no closing check: the script is the answer and
    the structured replies)."""
    return run(build_react_graph, response_format, model=MODEL, reflection="off", closing_check=False)


def test_native_structured_output_where_the_provider_has_it(provider):
    with ProviderServer(text("17 * 23 = 391."), structured({"answer": "three hundred ninety-one",
                                                              "value": 391})) as server:
        provider(server)
        result = on_server(Product)
    assert result["status"] == "answered" and result["final_answer"] == "17 * 23 = 391."
    assert result["structured_response"] == Product(answer="three hundred ninety-one", value=391)
    asked = server.requests[-1]
    assert asked["response_format"]["type"] == "json_schema" and "tools" not in asked
    assert asked["response_format"]["json_schema"]["name"] == "Product"
    assert "17 * 23 = 391." in asked["messages"][-1]["content"]  # the answer it restates, as data


def test_tool_strategy_asks_for_the_schema_as_the_one_tool(provider):
    with ProviderServer(text("17 * 23 = 391."), calls(("ProductDict", {"answer": "391", "value": 391}))) as server:
        provider(server)
        result = on_server(ToolStrategy(ProductDict))
    assert result["structured_response"] == {"answer": "391", "value": 391}
    asked = server.requests[-1]
    assert "response_format" not in asked and server.tool_names(len(server.requests) - 1) == ["ProductDict"]
    assert asked["tool_choice"] not in (None, "auto", "none")


def test_anthropic_answers_with_the_forced_tool(monkeypatch, provider):
    pytest.importorskip("langchain_anthropic")
    with ProviderServer(text("17 * 23 = 391."), structured({"answer": "391", "value": 391})) as server:
        provider(server)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.anthropic_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
        result = run(build_react_graph, Product, model="anthropic:claude-test", reflection="off",
                     closing_check=False)
    assert result["structured_response"] == Product(answer="391", value=391) and not server.rejections
    assert server.requests[-1]["tool_choice"] == {"type": "tool", "name": "Product"}


def test_a_server_without_json_schema_gives_json_in_its_text(monkeypatch, provider):
    with ProviderServer(text("17 * 23 = 391."), text('```json\n{"answer": "391", "value": 391}\n```')) as server:
        provider(server)
        monkeypatch.setenv("REACTGRAPH_STRUCTURED_OUTPUT", "json")  # as `auto` ends up on such a server
        result = on_server(PRODUCT_SCHEMA)
    assert result["structured_response"] == {"answer": "391", "value": 391}
    asked = server.requests[-1]
    assert "response_format" not in asked and '"title": "Product"' in asked["messages"][-1]["content"]


def test_provider_strategy_on_a_model_without_it_uses_a_tool():
    model = product_model()
    result = run(build_react_graph, ProviderStrategy(PRODUCT_SCHEMA), chat_model=model)
    assert result["status"] == "answered" and result["structured_response"]["value"] == 391
    asked = model.requests[-1]
    assert asked.purpose == "respond" and asked.schema["name"] == "Product"  # the schema offered as the one tool


def test_a_reply_that_does_not_fit_is_sent_back_with_what_was_wrong(provider):
    with ProviderServer(text("17 * 23 = 391."), structured({"answer": "391", "value": "many"}),
                        structured({"answer": "391", "value": 391})) as server:
        provider(server)
        result = on_server(PRODUCT_SCHEMA)
    assert result["status"] == "answered" and result["structured_response"] == {"answer": "391", "value": 391}
    retry = server.requests[-1]["messages"][-1]["content"]
    assert "did not match" in retry and "value" in retry and "not of type 'number'" in retry


def test_a_model_that_never_fits_ends_no_answer_with_the_text_kept(provider):
    bad = structured({"answer": 391})
    with ProviderServer(text("17 * 23 = 391."), bad, bad, bad) as server:
        provider(server)
        result = on_server(Product)
        assert len(server.requests) == 4  # the answer, then three attempts at its structure
    assert result["status"] == "no_answer" and result["structured_response"] is None
    assert result["final_answer"].startswith("17 * 23 = 391.\n\n(No structured response: Product: ")
    assert result["messages"][-1].content == result["final_answer"]
    record = result["steps"][-1]
    assert record["node"] == "respond" and record["status"] == "no_answer" and "answer" in record["thought"]


def test_a_failed_turn_is_not_asked_for_a_structure():
    from support.scripted import ScriptedChatModel

    model = ScriptedChatModel.of(RuntimeError("down"), RuntimeError("down"))
    graph = build_react_graph(default_gateway(), model=model, response_format=Product)
    result = graph.invoke({"messages": [HumanMessage(QUESTION)]}, context=Context(reflection="off"))
    assert result["status"] == "failed" and result["structured_response"] is None
    assert "respond" not in [step["node"] for step in result["steps"]]


# --- the CLI ------------------------------------------------------------------------------------------------


# The command as a user runs it, on its default offline model, end to end.
def test_ask_response_format_from_a_schema_file_and_a_module(monkeypatch, capfd, tmp_path, redis_url):
    schema = tmp_path / "product.json"
    schema.write_text(json.dumps(PRODUCT_SCHEMA))
    done = run_in_process(monkeypatch, capfd, ["ask", QUESTION, "--json", "--response-format", str(schema)],
                          REDIS_URL=redis_url)
    payload = json.loads(done.stdout)
    assert done.returncode == 0 and payload["structured_response"] == {"answer": "17 * 23 = 391.", "value": 391.0}
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "answer_formats.py").write_text("from pydantic import BaseModel\n\n"
                                                "class Product(BaseModel):\n    answer: str\n    value: int\n")
    done = run_in_process(monkeypatch, capfd, ["ask", QUESTION, "--response-format", "answer_formats:Product"],
                          REDIS_URL=redis_url)
    assert done.returncode == 0 and 'Structured response: {"answer": "17 * 23 = 391.", "value": 391}' in done.stdout
    done = run_in_process(monkeypatch, capfd, ["ask", QUESTION, "--response-format", "answer_formats:Nope"],
                          REDIS_URL=redis_url)
    assert done.returncode == 2 and "--response-format 'answer_formats:Nope'" in done.stderr
