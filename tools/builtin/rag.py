"""`rag_search`: semantic search over ingested documents (a FAISS index on disk), answered with cited snippets."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.embeddings import Embeddings

from reactgraph.tools.call import ToolError, ToolInputError
from reactgraph.tools.meta import ToolMeta

if TYPE_CHECKING:  # FAISS, numpy and the splitter load on the first search, not with the gateway
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.vectorstores import VectorStore as LangChainVectorStore

    from reactgraph.memory.vector_store import Embedder, VectorStore

INDEX_ENV = "REACTGRAPH_INDEX"
HOME_ENV = "REACTGRAPH_HOME"
KB_DIR = Path(__file__).with_name("data") / "kb"
MAX_QUERY_CHARS = 1_000
MAX_TOP_K = 10
MAX_SNIPPET_CHARS = 600
# What the model reads about the tool, the same whichever store answers (our index or a LangChain retriever).
RAG_SEARCH_DOC = """Search the user's ingested documents (the local knowledge base) and return cited passages.

Use it for questions about the user's own documents or notes ("according to the documents",
"根据知识库"), and when `search` has nothing on a topic. Each result gives the source file, chunk id,
similarity score and the passage text; quote the passage and name its source. "found": false
means no document matches: say so instead of guessing.

Args:
    query: The question or a few keywords, in Chinese or English, e.g. "断路器 连续失败 几次 打开".
    top_k: How many passages to return, 1 to 10.
"""


def reactgraph_home() -> Path:
    """Where react-graph keeps its files: $REACTGRAPH_HOME, else ~/.reactgraph."""
    return Path(os.environ.get(HOME_ENV) or "~/.reactgraph").expanduser()


def default_index_dir() -> Path:
    """The index used when none is named: the bundled knowledge base, plus whatever is ingested without --index."""
    return reactgraph_home() / "index-default"


def resolve_index(index: str | Path | None = None) -> Path:
    """The index directory: the one given, else $REACTGRAPH_INDEX, else the default index."""
    chosen = index or os.environ.get(INDEX_ENV) or default_index_dir()
    return Path(chosen).expanduser().resolve()


def seed_default_index(directory: Path, embedder: Embedder) -> None:
    """Build the default index from the bundled documents (tools/builtin/data/kb) if it does not exist yet.

    Under the index's write lock, so two processes starting at once seed it once.
    """
    from reactgraph.memory.vector_store import VectorStore

    if VectorStore.exists(directory):
        return
    with VectorStore.writing(directory, embedder) as store:
        if not store.sources:  # else another process seeded it while this one waited for the lock
            for path in sorted(KB_DIR.glob("*.md")):
                store.add_document(f"kb/{path.name}", path.read_text(encoding="utf-8"))
            store.label = {"seeded_from": "react-graph bundled knowledge base"}


def is_default_index(directory: Path) -> bool:
    return directory.resolve() == default_index_dir().resolve()


class _OpenStores:
    """Stores already loaded in this process, reloaded when their meta.json changes (another ingest)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stores: dict[Path, tuple[tuple[int, int], VectorStore]] = {}

    def get(self, directory: Path, embedder: Embedder) -> VectorStore | None:
        with self._lock:
            if is_default_index(directory):
                seed_default_index(directory, embedder)
            meta = directory / "meta.json"
            try:
                stat = meta.stat()
            except FileNotFoundError:
                return None
            stamp = (stat.st_mtime_ns, stat.st_size)
            cached = self._stores.get(directory)
            if cached and cached[0] == stamp and cached[1].embedder is embedder:
                return cached[1]
            from reactgraph.memory.vector_store import VectorStore

            store = VectorStore.open(directory, embedder)
            self._stores[directory] = (stamp, store)
            return store


_STORES = _OpenStores()


def search_documents(query: str, top_k: int, directory: Path, embedder: Embedder) -> dict[str, Any]:
    """The tool's answer: the best chunks above the embedder's relevance floor, each with its source."""
    query, top_k = _checked_query(query, top_k)
    from reactgraph.memory.vector_store import EmbedderMismatch, IndexCorrupt

    try:
        store = _STORES.get(directory, embedder)
    except (EmbedderMismatch, IndexCorrupt) as exc:
        raise ToolError(str(exc)) from exc
    answer: dict[str, Any] = {"query": query, "found": False, "results": []}
    if store is None or not len(store):
        answer["message"] = (f"no documents ingested in {directory}: add some with "
                             f"`reactgraph ingest PATH --index {directory}`")
        return answer
    floor = getattr(embedder, "relevance_floor", 0.0)
    hits = store.search(query, top_k)
    relevant = [hit for hit in hits if hit.score >= floor]
    # "title" and "snippet" lead, as in `search` results, so a result cut by the observation budget still parses.
    answer["results"] = [
        {"title": hit.chunk.section or Path(hit.chunk.source).name,
         "snippet": hit.chunk.text if len(hit.chunk.text) <= MAX_SNIPPET_CHARS
         else hit.chunk.text[:MAX_SNIPPET_CHARS - 1] + "…",
         "source": hit.chunk.source, "chunk_id": hit.chunk.id, "score": round(hit.score, 3)}
        for hit in relevant]
    answer["found"] = bool(relevant)
    if not relevant:
        best = f" (best score {hits[0].score:.2f}, below {floor:g})" if hits else ""
        answer["message"] = f"nothing in the {len(store.sources)} ingested document(s) matches '{query}'{best}"
    return answer


def rag_search_tool(index: str | Path | None = None, embedder: Embedder | Embeddings | None = None, *,
                    retriever: BaseRetriever | LangChainVectorStore | None = None) -> ToolMeta:
    """The `rag_search` tool over `index` (default: $REACTGRAPH_INDEX, else the bundled knowledge base).

    The embedder defaults to $REACTGRAPH_EMBEDDER (offline hashing when unset), read when first needed; a
    LangChain `Embeddings` may be given instead (`LangChainEmbedder` wraps it). With a LangChain `retriever` (any
    `BaseRetriever`, or a `VectorStore`, searched with relevance scores) the tool answers from it instead of our
    index, in the same answer shape.
    """
    if retriever is not None:
        return _retriever_tool(retriever)
    directory = resolve_index(index)
    if isinstance(embedder, Embeddings):
        from reactgraph.memory.vector_store.embedders import LangChainEmbedder

        embedder = LangChainEmbedder(embedder)
    chosen: list[Embedder] = [embedder] if embedder else []

    def rag_search(query: str, top_k: int = 4) -> dict[str, Any]:
        if not chosen:
            from reactgraph.memory.vector_store import embedder_from_spec

            try:
                chosen.append(embedder_from_spec())
            except ValueError as exc:
                raise ToolError(str(exc)) from exc
        return search_documents(query, top_k, directory, chosen[0])

    rag_search.__doc__ = RAG_SEARCH_DOC
    return ToolMeta.from_function(rag_search, timeout_s=15.0, tags=("knowledge", "documents"), max_attempts=1,
                                  extra={"index": str(directory)})


def _retriever_tool(retriever: BaseRetriever | LangChainVectorStore) -> ToolMeta:
    from reactgraph.tools.builtin.rag_retriever import is_searchable, search_retriever

    if not is_searchable(retriever):
        raise TypeError(f"retriever must be a LangChain BaseRetriever or VectorStore, not {type(retriever).__name__}")

    def rag_search(query: str, top_k: int = 4) -> dict[str, Any]:
        query, top_k = _checked_query(query, top_k)
        return search_retriever(retriever, query, top_k)

    rag_search.__doc__ = RAG_SEARCH_DOC
    return ToolMeta.from_function(rag_search, timeout_s=15.0, tags=("knowledge", "documents"), max_attempts=1,
                                  extra={"retriever": type(retriever).__name__})


def _checked_query(query: str, top_k: int) -> tuple[str, int]:
    if not query.strip():
        raise ToolInputError("query is empty; ask a question or give a few keywords")
    if len(query) > MAX_QUERY_CHARS:
        raise ToolInputError(f"query is too long (limit {MAX_QUERY_CHARS} characters)")
    return query, min(max(top_k, 1), MAX_TOP_K)
