"""Retrieval from LangChain's pieces: any `Embeddings` behind our index, any `VectorStore` or retriever behind
`rag_search` (Python, gateway, graph and the CLI's --retriever), with LangChain's own in-memory store and
deterministic fake embeddings."""

from __future__ import annotations

import json
import sys

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import InMemoryVectorStore

from reactgraph.graph import build_react_graph
from reactgraph.memory.vector_store import EmbedderMismatch, LangChainEmbedder, VectorStore
from reactgraph.tools import ToolGateway
from reactgraph.tools.builtin.rag import rag_search_tool
from support.scripted import ScriptedChatModel, call, tool_reply

FALCON = ("# Project Falcon notes\n\nThe launch date of Project Falcon moved to 14 October, because the payment "
          "provider needs two more weeks.")
TEA = "# Tea\n\nTieguanyin is an oolong tea from Anxi, Fujian."


@pytest.fixture(autouse=True)
def private_home(tmp_path, monkeypatch):
    monkeypatch.setenv("REACTGRAPH_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("REACTGRAPH_INDEX", raising=False)
    monkeypatch.delenv("REACTGRAPH_RETRIEVER", raising=False)


def falcon_store() -> InMemoryVectorStore:
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=32))
    store.add_documents([Document(FALCON, id="falcon-1", metadata={"source": "notes/falcon.md", "title": "Falcon"}),
                         Document(TEA, id="tea-1", metadata={"source": "notes/tea.md"})])
    return store


def run_rag(gateway: ToolGateway, query: str) -> dict:
    import asyncio

    result = asyncio.run(gateway.execute(call("rag_search", query=query, top_k=1)))
    assert result.status == "ok", result.content
    return json.loads(result.content)


def test_a_langchain_embeddings_backs_our_index_and_a_different_one_is_refused(tmp_path):
    embeddings = DeterministicFakeEmbedding(size=48)
    with VectorStore.writing(tmp_path / "index", LangChainEmbedder(embeddings)) as store:
        store.add_document("falcon.md", FALCON, markdown=False)
        store.add_document("tea.md", TEA, markdown=False)
    # the fake gives identical texts identical vectors: the exact passage is the nearest
    answer = run_rag(ToolGateway([rag_search_tool(tmp_path / "index", embeddings)]), FALCON.split("\n\n")[1])
    assert answer["found"] and answer["results"][0]["source"] == "falcon.md"
    with pytest.raises(EmbedderMismatch, match="dim=48"):
        VectorStore.open(tmp_path / "index", LangChainEmbedder(DeterministicFakeEmbedding(size=16)))


@pytest.mark.parametrize("kind", ["vector store", "retriever"])
def test_rag_search_answers_from_a_langchain_vector_store_or_retriever_in_our_answer_shape(kind):
    store = falcon_store()
    source = store if kind == "vector store" else store.as_retriever(search_kwargs={"k": 1})
    answer = run_rag(ToolGateway([rag_search_tool(retriever=source)]), FALCON)
    assert answer["found"] is True and list(answer["results"][0])[:4] == ["title", "snippet", "source", "chunk_id"]
    first = answer["results"][0]
    assert (first["title"], first["source"], first["chunk_id"]) == ("Falcon", "notes/falcon.md", "falcon-1")
    # InMemoryVectorStore defines no relevance function: ranked, and no score is made up for it
    assert "14 October" in first["snippet"] and "score" not in first


def test_the_react_graph_reads_the_retrievers_passage():
    model = ScriptedChatModel.of(tool_reply("look it up", call("rag_search", query="Falcon launch date")),
                                 AIMessage("14 October."))
    graph = build_react_graph(ToolGateway([rag_search_tool(retriever=falcon_store())]), model=model)
    result = graph.invoke({"messages": [HumanMessage("When does Project Falcon launch?")]},
                          {"configurable": {"thread_id": "lc-retriever"}}, context={"reflection": "off"})
    act = next(step for step in result["steps"] if step["node"] == "act")
    assert act["status"] == "ok" and "notes/" in act["observation"]


class _Broken(BaseRetriever):
    def _get_relevant_documents(self, query, *, run_manager):
        raise ConnectionError("vector database unreachable")


def test_a_retriever_that_fails_is_a_tool_error_and_passages_are_bounded():
    import asyncio

    result = asyncio.run(ToolGateway([rag_search_tool(retriever=_Broken())]).execute(call("rag_search", query="x")))
    assert result.status == "error" and "ConnectionError: vector database unreachable" in result.content
    huge = InMemoryVectorStore(DeterministicFakeEmbedding(size=8))
    huge.add_documents([Document("x" * 50_000, metadata={"source": "s" * 5_000, "secret": "not shown"})])
    first = run_rag(ToolGateway([rag_search_tool(retriever=huge)]), "x")["results"][0]
    assert len(first["snippet"]) <= 600 and len(first["source"]) <= 200 and "secret" not in json.dumps(first)
    with pytest.raises(TypeError, match="BaseRetriever or VectorStore"):
        rag_search_tool(retriever=object())  # type: ignore[arg-type]


def test_cli_ask_with_a_retriever_answers_from_it(cli, tmp_path, monkeypatch):
    (tmp_path / "my_retrievers.py").write_text(
        "from langchain_core.documents import Document\n"
        "from langchain_core.embeddings import DeterministicFakeEmbedding\n"
        "from langchain_core.vectorstores import InMemoryVectorStore\n"
        "def falcon():\n"
        "    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=32))\n"
        f"    store.add_documents([Document({FALCON!r}, metadata={{'source': 'falcon.md'}})])\n"
        "    return store\n"
        "NOT_A_RETRIEVER = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "my_retrievers", raising=False)
    code, out, err = cli("ask", "According to the documents, when is the launch date of Project Falcon?",
                         "--retriever", "my_retrievers:falcon", "--json", "--store", "memory")
    assert code == 0, err
    result = json.loads(out)
    act = next(step for step in result["steps"] if step["node"] == "act")
    assert act["action"] == "rag_search" and act["status"] == "ok" and "14 October" in result["answer"]
    code, out, err = cli("ask", "x", "--retriever", "my_retrievers:NOT_A_RETRIEVER", "--store", "memory")
    assert code == 2 and "retriever 'my_retrievers:NOT_A_RETRIEVER' is a int" in err and len(err.splitlines()) == 1
