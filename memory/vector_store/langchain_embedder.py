"""Any LangChain `Embeddings` as the vector store's embedder: the store, its index format and `rag_search` stay
ours, the vectors come from the model the user already has (`HuggingFaceEmbeddings`, `OllamaEmbeddings`, …).

LangChain's embeddings return plain float lists of any norm; the store needs unit float32 rows of a fixed
dimension and an identity that changes when the vectors would (an index built with one model must not be
searched with another). Queries go through `embed_query`, documents through `embed_documents`, since some
models embed the two differently.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
from langchain_core.embeddings import Embeddings

from reactgraph.memory.vector_store.embedders import unit_rows

REQUEST_TIMEOUT_S = 60.0


def _model_of(embeddings: Embeddings) -> str:
    for attribute in ("model", "model_name", "deployment"):
        if isinstance(value := getattr(embeddings, attribute, None), str) and value:
            return value
    return ""


class LangChainEmbedder:
    """The store's `Embedder` over a LangChain `Embeddings`.

    `name` defaults to `langchain:<class>[:<model>]`; `relevance_floor` (the least cosine `rag_search` counts as a
    hit) defaults to 0.0 — every nearest chunk counts — since a good floor depends on the model: measure it on your
    documents (`memory/vector_store/evaluation.py`) and pass it.
    """

    def __init__(self, embeddings: Embeddings, *, name: str | None = None, dim: int | None = None,
                 relevance_floor: float = 0.0) -> None:
        self.embeddings = embeddings
        self.model = _model_of(embeddings)
        self.name = name or ":".join(filter(None, ("langchain", type(embeddings).__name__, self.model)))
        self.relevance_floor = relevance_floor
        self.dim = dim or len(embeddings.embed_query("dimension probe"))

    def params(self) -> dict[str, Any]:
        kind = type(self.embeddings)
        return {"class": f"{kind.__module__}.{kind.__qualname__}", "model": self.model}

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self._checked(self.embeddings.embed_documents(list(texts)), len(texts))

    def embed_query(self, text: str) -> np.ndarray:
        """One (1, dim) row for a search query."""
        return self._checked([self.embeddings.embed_query(text)], 1)

    def _checked(self, vectors: Any, count: int) -> np.ndarray:
        matrix = np.asarray(vectors, dtype=np.float64)
        if matrix.shape != (count, self.dim):  # a model that changed under the index would corrupt the search
            raise ValueError(f"{self.name}: expected {count} vector(s) of dimension {self.dim}, got shape "
                             f"{matrix.shape}")
        return unit_rows(matrix)


class OpenAIEmbedder(LangChainEmbedder):
    """OpenAI (or OpenAI-compatible, via OPENAI_BASE_URL) embeddings through langchain-openai.

    Texts are sent as they are (`check_embedding_ctx_length=False`): otherwise langchain-openai first counts
    tokens with tiktoken, which downloads its tables from the internet, even for a local server (and most
    OpenAI-compatible servers do not take token arrays). Nothing is lost: chunks (400 characters) and
    queries (1,000) are far below any embedding model's context.
    """

    _DIMS: ClassVar[dict[str, int]] = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072,
                                       "text-embedding-ada-002": 1536}

    def __init__(self, model: str = "text-embedding-3-small", dim: int | None = None) -> None:
        try:
            from langchain_openai import OpenAIEmbeddings
        except ImportError as exc:
            raise ValueError("openai embeddings need langchain-openai: pip install 'react-graph[openai]'") from exc
        # a bounded wait (the client's default is 10 minutes) and its own retries for transient failures
        client = OpenAIEmbeddings(model=model, check_embedding_ctx_length=False, timeout=REQUEST_TIMEOUT_S,
                                  max_retries=2)
        # 0.25: a common cut-off for text-embedding-3 cosines; not measured here (no network)
        super().__init__(client, name=f"openai:{model}", dim=dim or self._DIMS.get(model), relevance_floor=0.25)
        self.model = model

    def params(self) -> dict[str, Any]:
        return {"model": self.model}  # as indexes built before this class had a base store it
