"""Knowledge retrieval: documents chunked, embedded and kept in a FAISS index on disk (used by `rag_search`).

- `documents`: reading text, markdown and (optional extra) PDF files, huge and binary files refused; then
  chunks: markdown sections, then Chinese- and English-aware pieces (langchain-text-splitters).
- `embedders`: the offline `HashingEmbedder` (default, no model download), and any LangChain `Embeddings` as an
  embedder (`LangChainEmbedder`; `OpenAIEmbedder` on it).
- `index`: `VectorIndex`, exact inner product when small, HNSW beyond a size threshold.
- `store`: `VectorStore`, add/replace/delete by source, search, atomic save; refuses a foreign embedder.
- `records`: `ChunkRecord` (with its JSON metadata) and `Hit`; the bounds on what is added and read back.
- `langchain_store`: `ReactGraphVectorStore`, our store as a LangChain `VectorStore` (one entry per Document).
"""

from reactgraph.memory.vector_store.documents import (
           MAX_FILE_BYTES,
           Chunk,
           DocumentRejected,
           expand_paths,
           load_document,
           split_document,
)
from reactgraph.memory.vector_store.embedders import (
           Embedder,
           HashingEmbedder,
           LangChainEmbedder,
           OpenAIEmbedder,
           embedder_from_spec,
           signature,
)
from reactgraph.memory.vector_store.index import HnswParams, VectorIndex
from reactgraph.memory.vector_store.langchain_store import ReactGraphVectorStore
from reactgraph.memory.vector_store.store import (
           ChunkRecord,
           EmbedderMismatch,
           Hit,
           IndexCorrupt,
           VectorStore,
)

__all__ = [
           "MAX_FILE_BYTES",
           "Chunk",
           "ChunkRecord",
           "DocumentRejected",
           "Embedder",
           "EmbedderMismatch",
           "HashingEmbedder",
           "Hit",
           "HnswParams",
           "IndexCorrupt",
           "LangChainEmbedder",
           "OpenAIEmbedder",
           "ReactGraphVectorStore",
           "VectorIndex",
           "VectorStore",
           "embedder_from_spec",
           "expand_paths",
           "load_document",
           "signature",
           "split_document",
]
