"""Session memory through the compiled graph: a long conversation stays bounded and keeps its facts."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from reactgraph.graph import Context, build_react_graph
from reactgraph.nodes.conversation import last_human_index
from reactgraph.nodes.turn_memory import qa_namespace

CITIES = ["北京", "上海", "广州", "深圳", "杭州", "成都", "武汉", "西安"]


def question_for(turn: int) -> str:
    if turn % 3 == 0:
        return f"计算 ({turn} + 17) * 3 等于多少"
    if turn % 3 == 1:
        return f"{CITIES[turn % len(CITIES)]}的天气怎么样？"
    return f"what is {turn} times 7?"


def prompt_tokens(result) -> int:
    """Input tokens of the turn's first model call (the think step sees the whole prompt)."""
    messages = result["messages"]
    first_reply = next(m for m in messages[last_human_index(messages):] if isinstance(m, AIMessage))
    return first_reply.usage_metadata["input_tokens"]


def test_forty_turns_keep_the_prompt_bounded_and_a_turn_one_fact_answerable():
    store = InMemoryStore()
    graph = build_react_graph(checkpointer=InMemorySaver(), store=store)
    config = {"configurable": {"thread_id": "long-talk"}}
    context = Context(reflection="rules")

    def turn(text: str):
        return graph.invoke({"messages": [HumanMessage(text)]}, config=config, context=context)

    turn("我叫小明，我最喜欢的城市是杭州。")
    tokens = {}
    for n in range(2, 40):
        result = turn(question_for(n))
        assert result["status"] == "answered", (n, result["final_answer"])
        tokens[n] = prompt_tokens(result)
    final = turn("我最喜欢的城市是哪个？")

    assert "杭州" in final["final_answer"]
    assert all(m.content != "我叫小明，我最喜欢的城市是杭州。" for m in final["messages"])  # folded away...
    assert "杭州" in final["summary"]  # ...into the summary
    assert max(tokens[n] for n in range(36, 40)) <= 1.2 * max(tokens[n] for n in range(6, 10))
    log = store.search(qa_namespace("long-talk"), limit=100)
    assert len(log) == 40 and any(item.value["question"].startswith("我叫小明") for item in log)
