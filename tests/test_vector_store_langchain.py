"""Our vector store as a LangChain `VectorStore`: langchain-tests' vector-store suite in memory and on disk,
persistence through the index directory, indexes saved before chunks had metadata, hostile metadata on disk,
and `as_retriever()` behind `rag_search` in the compiled graph with the offline model."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.messages import HumanMessage
from langchain_core.vectorstores import VectorStore as LangChainVectorStore
from langchain_tests.integration_tests import VectorStoreIntegrationTests

from reactgraph.graph import build_react_graph
from reactgraph.memory.vector_store import (
    IndexCorrupt,
    LangChainEmbedder,
    ReactGraphVectorStore,
    VectorStore,
)
from reactgraph.memory.vector_store.records import MAX_RECORD_CHARS
from reactgraph.tools import ToolGateway
from reactgraph.tools.builtin.rag import rag_search_tool
from support.scripted import call

FALCON = ("The launch date of Project Falcon moved to 14 October, because the payment provider needs two more "
          "weeks.")
TEA = "Tieguanyin is an oolong tea from Anxi, Fujian."


class TestInMemory(VectorStoreIntegrationTests):
    @pytest.fixture
    def vectorstore(self) -> Iterator[LangChainVectorStore]:  # type: ignore[override]
        yield ReactGraphVectorStore(self.get_embeddings())


class TestInADirectory(VectorStoreIntegrationTests):
    @pytest.fixture
    def vectorstore(self, tmp_path: Path) -> Iterator[LangChainVectorStore]:  # type: ignore[override]
        yield ReactGraphVectorStore(self.get_embeddings(), tmp_path / "index")


def embeddings() -> DeterministicFakeEmbedding:
    return DeterministicFakeEmbedding(size=16)


def test_documents_metadata_and_deletes_persist_in_the_directory(tmp_path):
    store = ReactGraphVectorStore.from_texts([FALCON, TEA], embeddings(), [{"source": "falcon.md", "tags": ["a"]},
                                             {"source": "tea.md", "n": 2}], ids=["falcon", "tea"],
                                             directory=tmp_path / "kb")
    store.delete(["tea"])
    reopened = ReactGraphVectorStore(embeddings(), tmp_path / "kb")
    assert reopened.get_by_ids(["falcon", "tea"]) == [
        Document(FALCON, id="falcon", metadata={"source": "falcon.md", "tags": ["a"]})]
    # the directory is our own index: the plain store reads the entry whole, metadata and all
    hit = VectorStore.open(tmp_path / "kb", LangChainEmbedder(embeddings())).search(FALCON)[0]
    assert (hit.chunk.source, hit.chunk.text, hit.chunk.metadata) == ("falcon", FALCON, {"source": "falcon.md",
                                                                                         "tags": ["a"]})
    # another writer's save (here another object; an ingest alike) is seen by the next read
    ReactGraphVectorStore(embeddings(), tmp_path / "kb").add_texts([TEA], ids=["tea"])
    assert [d.id for d in store.get_by_ids(["falcon", "tea"])] == ["falcon", "tea"]
    reopened.delete()
    assert store.similarity_search("Falcon") == []
    assert ReactGraphVectorStore(embeddings(), tmp_path / "kb").similarity_search("Falcon") == []


def test_documents_are_entries_whole_and_searchable_by_vector():
    store = ReactGraphVectorStore(embeddings())
    long_text = "\n\n".join(f"Paragraph {i}: " + "words " * 80 for i in range(6))  # our ingest would chunk it
    # one id twice in a call: the later document is the entry, as two calls would leave it
    store.add_documents([Document(long_text, id="long"), Document("old tea", id="tea"), Document(TEA, id="tea")])
    assert [d.page_content for d in store.get_by_ids(["long"])] == [long_text]
    nearest = store.similarity_search_by_vector(embeddings().embed_query(TEA), k=1)
    assert nearest == [Document(TEA, id="tea")]
    (document, score), = store.similarity_search_with_relevance_scores(TEA, k=1)
    assert document.id == "tea" and 0.99 < score <= 1.0


def test_what_json_cannot_keep_is_refused_and_nothing_of_the_batch_is_added():
    store = ReactGraphVectorStore(embeddings())
    with pytest.raises(ValueError, match=r"metadata of 'bad' cannot be stored as JSON"):
        store.add_documents([Document(TEA, id="fine"), Document(TEA, id="bad", metadata={"when": object()})])
    with pytest.raises(ValueError, match="over 65536"):
        store.add_documents([Document(TEA, id="big", metadata={"blob": "x" * 70_000})])
    assert store.get_by_ids(["fine", "bad", "big"]) == []
    with pytest.raises(TypeError, match="does not take filter"):
        store.similarity_search("tea", filter={"source": "tea.md"})


def _strip_metadata(directory: Path) -> None:
    """Rewrite the saved chunks as the store wrote them before chunks had metadata."""
    chunks, = directory.glob("chunks-*.jsonl")
    records = [json.loads(line) for line in chunks.read_text(encoding="utf-8").splitlines()]
    assert all(record.pop("metadata") == {} for record in records)
    chunks.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")


def test_an_index_saved_before_chunks_had_metadata_still_opens(tmp_path):
    text = "# Falcon\n\n" + FALCON
    with VectorStore.writing(tmp_path / "old", LangChainEmbedder(embeddings())) as store:
        assert store.add_document("notes/falcon.md", text) == ("added", 1)
    _strip_metadata(tmp_path / "old")
    with VectorStore.writing(tmp_path / "old", LangChainEmbedder(embeddings())) as store:
        assert store.search(FALCON)[0].chunk.metadata == {}
        assert store.add_document("notes/falcon.md", text) == ("unchanged", 1)  # its digest is still the text's
    # an ingested file's chunks come back through the LangChain API with their source and section
    found = ReactGraphVectorStore(embeddings(), tmp_path / "old").similarity_search(FALCON, k=1)
    assert found == [Document(FALCON, id="notes/falcon.md",
                              metadata={"source": "notes/falcon.md", "section": "Falcon"})]


@pytest.mark.parametrize(("metadata", "cause"), [
    ('["not", "an", "object"]', "is a list, not a mapping"),
    ('{"blob": "' + "x" * 70_000 + '"}', "over 65536"),
    ("[" * 100_000 + "]" * 100_000, "recursion"),
    ('"' + "x" * MAX_RECORD_CHARS + '"', f"a chunk record is over {MAX_RECORD_CHARS} characters"),
])
def test_hostile_metadata_on_disk_is_a_corrupt_index_named_in_one_line(tmp_path, metadata, cause):
    ReactGraphVectorStore.from_texts([TEA], embeddings(), ids=["tea"], directory=tmp_path / "kb")
    chunks, = (tmp_path / "kb").glob("chunks-*.jsonl")
    line = chunks.read_text(encoding="utf-8").strip()
    chunks.write_text(line.replace('"metadata": {}', f'"metadata": {metadata}') + "\n", encoding="utf-8")
    with pytest.raises(IndexCorrupt, match=cause) as raised:
        ReactGraphVectorStore(embeddings(), tmp_path / "kb")
    assert len(str(raised.value).splitlines()) == 1 and len(str(raised.value)) < 500


def test_as_retriever_backs_rag_search_in_the_graph_with_the_offline_model(tmp_path):
    store = ReactGraphVectorStore.from_texts([FALCON, TEA], embeddings(),
                                             [{"source": "notes/falcon.md"}, {"source": "notes/tea.md"}],
                                             directory=tmp_path / "kb")
    gateway = ToolGateway([rag_search_tool(retriever=store.as_retriever(search_kwargs={"k": 2}))])
    graph = build_react_graph(gateway)  # no model: the offline one
    result = graph.invoke({"messages": [HumanMessage("According to the documents, when is the launch date of "
                                                     "Project Falcon?")]},
                          {"configurable": {"thread_id": "lc-vector-store"}}, context={"reflection": "off"})
    act = next(step for step in result["steps"] if step["node"] == "act")
    assert act["action"] == "rag_search" and act["status"] == "ok" and "notes/falcon.md" in act["observation"]
    assert "14 October" in result["final_answer"]


def test_our_own_rag_search_reads_a_directory_the_adapter_wrote(tmp_path):
    ReactGraphVectorStore.from_texts([FALCON, TEA], embeddings(), ids=["notes/falcon.md", "notes/tea.md"],
                                     directory=tmp_path / "kb")
    gateway = ToolGateway([rag_search_tool(tmp_path / "kb", embeddings())])
    result = asyncio.run(gateway.execute(call("rag_search", query=FALCON, top_k=1)))
    first = json.loads(result.content)["results"][0]
    assert result.status == "ok" and (first["source"], first["snippet"]) == ("notes/falcon.md", FALCON)
