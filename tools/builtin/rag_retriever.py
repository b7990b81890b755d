"""`rag_search` answered by a LangChain retriever or vector store the user already has (Chroma, PGVector, a
`VectorStoreRetriever`, an ensemble…), in the same answer shape as our own index: the model, the offline model
and the observers read one format whichever store is behind the tool.

What comes back is other people's data: each passage is cut to the snippet limit, titles and sources to short
strings, and only the fields below leave this module (never the documents' whole metadata).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import VectorStore as LangChainVectorStore

from reactgraph.tools.call import ToolError

MAX_SNIPPET_CHARS = 600
MAX_LABEL_CHARS = 200
Searchable = BaseRetriever | LangChainVectorStore


def is_searchable(source: object) -> bool:
    return isinstance(source, BaseRetriever | LangChainVectorStore)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _scored(source: Searchable, query: str, top_k: int) -> list[tuple[Document, float | None]]:
    """The `top_k` best documents, each with its relevance in [0, 1] where the store can say."""
    if isinstance(source, LangChainVectorStore):
        try:
            scored = source.similarity_search_with_relevance_scores(query, k=top_k)
            return [(doc, float(score)) for doc, score in scored]
        except NotImplementedError:  # a store with no relevance function: ranked, unscored
            return [(doc, None) for doc in source.similarity_search(query, k=top_k)]
    documents = source.invoke(query)[:top_k]
    return [(doc, _metadata_score(doc)) for doc in documents]


def _metadata_score(doc: Document) -> float | None:
    """The score a retriever left in the metadata (rerankers, some stores' retrievers), if a number."""
    for key in ("relevance_score", "score"):
        value = doc.metadata.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    return None


def search_retriever(source: Searchable, query: str, top_k: int) -> dict[str, Any]:
    """The tool's answer from a LangChain retriever or vector store (its own failures are a tool error)."""
    try:
        found = _scored(source, query, top_k)
    except Exception as exc:  # any store's failure is this call's error, named, not a crash
        raise ToolError(f"the retriever failed: {type(exc).__name__}: {_cut(str(exc), MAX_LABEL_CHARS)}") from exc
    results = []
    for position, (doc, score) in enumerate(found, start=1):
        source_name = str(doc.metadata.get("source") or "")
        title = str(doc.metadata.get("title") or (Path(source_name).name if source_name else f"passage {position}"))
        entry: dict[str, Any] = {"title": _cut(title, MAX_LABEL_CHARS),
                                 "snippet": _cut(str(doc.page_content), MAX_SNIPPET_CHARS),
                                 "source": _cut(source_name, MAX_LABEL_CHARS), "chunk_id": _cut(str(doc.id or ""), 100)}
        if score is not None:
            entry["score"] = round(score, 3)
        results.append(entry)
    answer: dict[str, Any] = {"query": query, "found": bool(results), "results": results}
    if not results:
        answer["message"] = f"nothing in the knowledge base matches '{query}'"
    return answer
