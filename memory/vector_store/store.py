"""`VectorStore`: chunked documents, their embeddings in a FAISS index, and the metadata, persisted to a directory."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from reactgraph.errors import ReactGraphError
from reactgraph.memory.vector_store.chunking import split_document
from reactgraph.memory.vector_store.embedders import (
    Embedder,
    describe,
    embedder_from_spec,
    signature,
)
from reactgraph.memory.vector_store.index import VectorIndex

FORMAT = 1
META = "meta.json"
RERANK_POOL = 10
RERANK_WEIGHT = 0.3


class EmbedderMismatch(ReactGraphError, ValueError):
    """The index was built with another embedder: its vectors and the query's would not be comparable."""


class IndexCorrupt(ReactGraphError, ValueError):
    """The index directory exists but cannot be read."""


@dataclass(frozen=True)
class ChunkRecord:
    """A stored chunk: its id in the FAISS index, where it came from, and its text."""

    id: int
    source: str
    section: str
    ordinal: int
    text: str


@dataclass(frozen=True)
class Hit:
    """A search result: the chunk and its cosine similarity to the query."""

    chunk: ChunkRecord
    score: float


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """An exclusive lock on the directory while one writer reads, changes and saves the store."""
    directory.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # no advisory locks (Windows): concurrent writers are the user's to avoid
        yield
        return
    with open(directory / ".lock", "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class VectorStore:
    """Documents as chunks with embeddings; add/replace/delete by source, search by meaning, save to a directory.

    A directory holds meta.json (format, embedder signature, sources, generation) and that generation's
    index-N.faiss and chunks-N.jsonl. A save writes a new generation and then swaps meta.json atomically,
    so a reader never sees half a save. Opening a directory built with another embedder is refused.
    """

    def __init__(self, embedder: Embedder, directory: Path | None = None, *, index: VectorIndex | None = None) -> None:
        self.embedder = embedder
        self.directory = directory
        self.index = index or VectorIndex(embedder.dim)
        self.chunks: dict[int, ChunkRecord] = {}
        self.sources: dict[str, dict[str, Any]] = {}
        self.label: dict[str, Any] = {}
        self._next_id = 0
        self._generation = 0
        # Chunk id -> the chunk's lexical keys for re-ranking. Ids are never reused and chunks never change,
        # so an entry stays right until its chunk is deleted; without it every query re-tokenised its pool.
        self._lexical_keys: dict[int, set[str]] = {}

    def __len__(self) -> int:
        return len(self.chunks)

    @staticmethod
    def exists(directory: Path) -> bool:
        return (Path(directory) / META).is_file()

    @classmethod
    def open(cls, directory: Path | str, embedder: Embedder | None = None) -> VectorStore:
        """The store saved in `directory`, or a new empty one there (written on the first `save`)."""
        directory = Path(directory).expanduser()
        embedder = embedder or embedder_from_spec()
        store = cls(embedder, directory)
        if not cls.exists(directory):
            return store
        try:
            meta = json.loads((directory / META).read_text(encoding="utf-8"))
            stored = meta["embedder"]
        except (OSError, ValueError, KeyError) as exc:
            raise IndexCorrupt(f"cannot read the index in {directory}: {exc}") from exc
        current = signature(embedder)
        if stored != current:
            raise EmbedderMismatch(f"index {directory} was built with embedder {describe(stored, current)}, but this "
                                   f"run uses {describe(current, stored)}; use the same embedder "
                                   "($REACTGRAPH_EMBEDDER) or ingest into another --index directory")
        generation = meta["generation"]
        try:
            store.index = VectorIndex.load(directory / f"index-{generation}.faiss", meta["index"])
            with open(directory / f"chunks-{generation}.jsonl", encoding="utf-8") as lines:
                for line in lines:
                    record = ChunkRecord(**json.loads(line))
                    store.chunks[record.id] = record
        except (OSError, ValueError, KeyError, TypeError, RuntimeError) as exc:
            raise IndexCorrupt(f"cannot read the index in {directory}: {exc}") from exc
        store.sources, store.label = meta["sources"], meta.get("label", {})
        store._next_id, store._generation = meta["next_id"], generation
        return store

    @classmethod
    @contextlib.contextmanager
    def writing(cls, directory: Path | str, embedder: Embedder | None = None) -> Iterator[VectorStore]:
        """Open under an exclusive lock, let the caller change the store, save it if it changed."""
        directory = Path(directory).expanduser()
        with _locked(directory):
            store = cls.open(directory, embedder)
            before = store._next_id, len(store)
            yield store
            if (store._next_id, len(store)) != before or not cls.exists(directory):
                store.save()

    def add_document(self, source: str, text: str, *, markdown: bool = True) -> tuple[str, int]:
        """Index `text` as `source`: ("added" | "updated" | "unchanged", number of chunks)."""
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        previous = self.sources.get(source)
        if previous and previous["sha256"] == digest:
            return "unchanged", len(previous["ids"])
        chunks = split_document(text, markdown=markdown)
        vectors = self.embedder.embed([c.embedding_text for c in chunks]) if chunks else None
        self.delete_source(source)
        ids = list(range(self._next_id, self._next_id + len(chunks)))
        self._next_id += len(chunks)
        if vectors is not None:
            self.index.add(np.asarray(ids, dtype=np.int64), vectors)
        for chunk_id, chunk in zip(ids, chunks, strict=True):
            self.chunks[chunk_id] = ChunkRecord(chunk_id, source, chunk.section, chunk.ordinal, chunk.text)
        self.sources[source] = {"sha256": digest, "ids": ids}
        return ("updated" if previous else "added"), len(chunks)

    def delete_source(self, source: str) -> int:
        """Remove every chunk of `source`; returns how many there were (0 for an unknown source)."""
        entry = self.sources.pop(source, None)
        if not entry:
            return 0
        self.index.remove(entry["ids"])
        for chunk_id in entry["ids"]:
            self.chunks.pop(chunk_id, None)
            self._lexical_keys.pop(chunk_id, None)
        return len(entry["ids"])

    def search(self, query: str, top_k: int = 4, *, min_score: float = -1.0) -> list[Hit]:
        """The `top_k` chunks most similar to `query` with a score of at least `min_score`, best first.

        With an embedder that names its lexical keys (the hashing one), a wider pool of nearest chunks is
        re-ranked by score + RERANK_WEIGHT × the share of the query's words and bigrams each chunk contains:
        on tests/data/retrieval this lifts recall@1 from 0.82 to 0.95 at the same recall@5. Hit.score stays
        the cosine, so thresholds keep their meaning.
        """
        if not self.chunks or not query.strip():
            return []
        # an embedder that embeds queries their own way (LangChain's `embed_query`) is asked that way
        embed_query = getattr(self.embedder, "embed_query", None)
        vector = embed_query(query) if embed_query else self.embedder.embed([query])
        if not np.any(vector):
            return []
        keys = getattr(self.embedder, "lexical_keys", None)
        pool = max(top_k * 3, RERANK_POOL) if keys else top_k
        scores, ids = self.index.search(vector, pool)
        hits = [Hit(self.chunks[int(i)], float(s)) for s, i in zip(scores[0], ids[0], strict=True)
                if i >= 0 and int(i) in self.chunks and s >= min_score]
        if keys and hits:
            wanted = keys(query)

            def blended(hit: Hit) -> float:
                chunk_keys = self._lexical_keys.get(hit.chunk.id)
                if chunk_keys is None:
                    chunk_keys = self._lexical_keys[hit.chunk.id] = keys(f"{hit.chunk.section}\n{hit.chunk.text}")
                found = chunk_keys & wanted
                return hit.score + RERANK_WEIGHT * len(found) / max(len(wanted), 1)

            hits.sort(key=blended, reverse=True)
        return hits[:top_k]

    def save(self, directory: Path | str | None = None) -> Path:
        """Write a new generation of the files, then switch meta.json to it; older generations are removed."""
        directory = Path(directory or self.directory or "").expanduser()
        if not str(directory) or directory == Path():
            raise ValueError("no directory to save the vector store to")
        directory.mkdir(parents=True, exist_ok=True)
        self.directory, generation = directory, self._generation + 1
        state = self.index.save(directory / f"index-{generation}.faiss")
        with open(directory / f"chunks-{generation}.jsonl", "w", encoding="utf-8") as out:
            out.writelines(json.dumps(asdict(record), ensure_ascii=False) + "\n" for record in self.chunks.values())
        meta = {"format": FORMAT, "embedder": signature(self.embedder), "generation": generation,
                "next_id": self._next_id, "chunks": len(self.chunks), "index": state, "sources": self.sources,
                "label": self.label}
        temporary = directory / f"{META}.{os.getpid()}.tmp"
        temporary.write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")
        os.replace(temporary, directory / META)
        self._generation = generation
        for old in (*directory.glob("index-*.faiss"), *directory.glob("chunks-*.jsonl")):
            if old.stem.rsplit("-", 1)[-1] != str(generation):
                old.unlink(missing_ok=True)
        return directory
