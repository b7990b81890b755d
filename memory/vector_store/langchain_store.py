"""Our vector store as a LangChain `VectorStore` (`ReactGraphVectorStore`): what LangChain code expects of one
(`add_documents`, `similarity_search*`, `get_by_ids`, `delete`, `from_texts`, `as_retriever()`, the async
variants), over our FAISS index and, given a directory, its atomic saves.

Each LangChain `Document` is one entry of our store, its id the entry's source key; it is not chunked again
(LangChain users split before they add). Its metadata is kept as JSON keeps it (anything else is refused, as are
entries and metadata over the store's bounds). Entries ingested by `reactgraph ingest` into the same directory are
chunks: each comes back as a Document whose id is its file and whose metadata names its source and section.
"""

from __future__ import annotations

import contextlib
import copy
import math
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore as BaseVectorStore

from reactgraph.memory.vector_store.embedders import LangChainEmbedder
from reactgraph.memory.vector_store.records import ChunkRecord, Hit
from reactgraph.memory.vector_store.store import META, VectorStore


def _relevance(score: float) -> float:
    """A cosine as LangChain's relevance in [0, 1]: the same number where it is positive (as `rag_search` over
    our own index reports it), 0 for the opposite directions."""
    return min(1.0, max(0.0, score))


def _refuse_unknown(kwargs: dict[str, Any]) -> None:
    # an option this store does not implement (a `filter`, say) is refused, not silently ignored
    if kwargs:
        raise TypeError(f"ReactGraphVectorStore does not take {', '.join(sorted(kwargs))}")


class ReactGraphVectorStore(BaseVectorStore):
    """A LangChain `VectorStore` over our `VectorStore`, embedding with any LangChain `Embeddings`.

    With `directory`, the index there is opened (or created) and every change is saved there under the
    store's write lock (re-reading what other writers saved first), and a search after another writer's save
    re-opens it; without it, the store lives in memory.
    Scores are cosine similarities, higher is closer.
    """

    def __init__(self, embedding: Embeddings, directory: Path | str | None = None) -> None:
        self._embedding = embedding
        self._embedder = LangChainEmbedder(embedding)
        self.directory = Path(directory).expanduser() if directory is not None else None
        self._stamp = self._meta_stamp()
        self._store = (VectorStore.open(self.directory, self._embedder) if self.directory is not None
                       else VectorStore(self._embedder))
        # the async methods run the sync ones in threads: one change or search at a time
        self._lock = threading.RLock()

    @property
    def embeddings(self) -> Embeddings:
        return self._embedding

    def _meta_stamp(self) -> tuple[int, int] | None:
        try:
            stat = (self.directory / META).stat() if self.directory is not None else None
        except FileNotFoundError:
            return None
        return (stat.st_mtime_ns, stat.st_size) if stat else None

    def _current(self) -> VectorStore:
        """The store to read: with a directory, re-opened when its meta.json changed since this object last
        opened or saved it (another process ingested, say)."""
        if self.directory is not None and (stamp := self._meta_stamp()) != self._stamp:
            self._store, self._stamp = VectorStore.open(self.directory, self._embedder), stamp
        return self._store

    @contextlib.contextmanager
    def _changing(self) -> Iterator[VectorStore]:
        """The store to change; with a directory, re-opened under its lock and saved when it changed."""
        with self._lock:
            if self.directory is None:
                yield self._store
                return
            with VectorStore.writing(self.directory, self._embedder) as store:
                yield store
            self._store, self._stamp = store, self._meta_stamp()

    def add_documents(self, documents: list[Document], **kwargs: Any) -> list[str]:
        """Add or replace each document under its id (`ids=` first, then `Document.id`, else a new uuid4)."""
        ids = kwargs.pop("ids", None)
        _refuse_unknown(kwargs)
        if ids is not None and len(ids) != len(documents):
            raise ValueError(f"{len(ids)} ids for {len(documents)} documents")
        given = ids if ids is not None else [document.id for document in documents]
        keys = [str(key) if key else str(uuid.uuid4()) for key in given]
        # a later document with the same id replaces an earlier one, as separate calls would
        latest = dict(zip(keys, documents, strict=True))
        with self._changing() as store:
            store.add_documents([(key, doc.page_content, doc.metadata) for key, doc in latest.items()], whole=True)
        return keys

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        """Remove these ids (unknown ones are ignored); every entry when `ids` is None."""
        _refuse_unknown(kwargs)
        with self._changing() as store:
            for key in list(store.sources) if ids is None else ids:
                store.delete_source(str(key))
        return True

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """The documents with these ids, in that order; unknown ids are left out."""
        with self._lock:
            store = self._current()
            return [self._document(chunk) for key in ids for chunk in store.chunks_of(str(key))]

    def _document(self, chunk: ChunkRecord) -> Document:
        metadata = copy.deepcopy(chunk.metadata)  # the caller may change what it gets; the store stays as it was
        if not self._store.sources.get(chunk.source, {}).get("whole"):
            metadata = {"source": chunk.source, **({"section": chunk.section} if chunk.section else {}), **metadata}
        return Document(id=chunk.source, page_content=chunk.text, metadata=metadata)

    def _scored(self, hits: list[Hit]) -> list[tuple[Document, float]]:
        return [(self._document(hit.chunk), hit.score) for hit in hits]

    def similarity_search_with_score(self, query: str, k: int = 4, **kwargs: Any) -> list[tuple[Document, float]]:
        """The `k` documents nearest to `query` with their cosine similarity, best first; no threshold."""
        _refuse_unknown(kwargs)
        with self._lock:
            return self._scored(self._current().search(query, k, min_score=-math.inf))

    def similarity_search(self, query: str, k: int = 4, **kwargs: Any) -> list[Document]:
        return [document for document, _ in self.similarity_search_with_score(query, k, **kwargs)]

    def similarity_search_by_vector(self, embedding: list[float], k: int = 4, **kwargs: Any) -> list[Document]:
        _refuse_unknown(kwargs)
        with self._lock:
            return [doc for doc, _ in self._scored(self._current().search_by_vector(embedding, k, min_score=-math.inf))]

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        return _relevance

    @classmethod
    def from_texts(cls, texts: Iterable[str], embedding: Embeddings, metadatas: list[dict[str, Any]] | None = None,
                   *, ids: list[str] | None = None, directory: Path | str | None = None,
                   **kwargs: Any) -> ReactGraphVectorStore:
        """A store (in memory, or in `directory`) holding these texts."""
        _refuse_unknown(kwargs)
        store = cls(embedding, directory)
        store.add_texts(list(texts), metadatas, ids=ids)
        return store
