"""`VectorStore`: chunked documents, their embeddings in a FAISS index, and the metadata, persisted to a directory."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from reactgraph.errors import ReactGraphError
from reactgraph.memory.vector_store.documents import Chunk, split_document
from reactgraph.memory.vector_store.embedders import (
    Embedder,
    describe,
    embedder_from_spec,
    signature,
    unit_rows,
)
from reactgraph.memory.vector_store.index import VectorIndex
from reactgraph.memory.vector_store.records import (
    MAX_RECORD_CHARS,
    ChunkRecord,
    Hit,
    checked_entry,
    checked_metadata,
    record_from_line,
)

__all__ = ["ChunkRecord", "EmbedderMismatch", "Hit", "IndexCorrupt", "VectorStore"]

FORMAT = 1
META = "meta.json"
RERANK_POOL = 10
RERANK_WEIGHT = 0.3


class EmbedderMismatch(ReactGraphError, ValueError):
    """The index was built with another embedder: its vectors and the query's would not be comparable."""


class IndexCorrupt(ReactGraphError, ValueError):
    """The index directory exists but cannot be read."""


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
                # bounded reads: a line past the limit is refused without reading all of it
                for line in iter(lambda: lines.readline(MAX_RECORD_CHARS + 1), ""):
                    record = record_from_line(line)
                    store.chunks[record.id] = record
        except (OSError, ValueError, KeyError, TypeError, RuntimeError, RecursionError) as exc:
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

    def add_document(self, source: str, text: str, *, markdown: bool = True, whole: bool = False,
                     metadata: Mapping[str, Any] | None = None) -> tuple[str, int]:
        """Index `text` as `source`: ("added" | "updated" | "unchanged", number of chunks).

        `whole=True` keeps the text as one entry instead of chunking it (LangChain users split before they add);
        `metadata` (JSON only, bounded) is kept with each of the document's chunks.
        """
        return self.add_documents([(source, text, metadata)], markdown=markdown, whole=whole)[0]

    def add_documents(self, entries: Sequence[tuple[str, str, Mapping[str, Any] | None]], *, markdown: bool = True,
                      whole: bool = False) -> list[tuple[str, int]]:
        """`add_document` for each (source, text, metadata), with one embedding call for all their chunks.

        Everything is checked and embedded before the store changes: a refused entry or a failing embedder
        changes nothing. A source may appear once per call.
        """
        if len({source for source, _, _ in entries}) != len(entries):
            raise ValueError("a source appears twice in one add_documents call")
        planned: list[tuple[str, str, list[Chunk], dict[str, Any]]] = []
        results: list[tuple[str, int]] = []
        for source, text, metadata in entries:
            kept = checked_metadata(metadata, repr(source))
            digest = _digest(checked_entry(text, repr(source)) if whole else text, kept, whole=whole)
            previous = self.sources.get(source)
            if previous and previous["sha256"] == digest:
                results.append(("unchanged", len(previous["ids"])))
                continue
            chunks = [Chunk(text, "", 0)] if whole else split_document(text, markdown=markdown)
            planned.append((source, digest, chunks, kept))
            results.append(("updated" if previous else "added", len(chunks)))
        texts = [chunk.embedding_text for _, _, chunks, _ in planned for chunk in chunks]
        vectors = self.embedder.embed(texts) if texts else np.zeros((0, self.embedder.dim), np.float32)
        offset = 0
        for source, digest, chunks, kept in planned:
            self._replace(source, chunks, vectors[offset:offset + len(chunks)],
                          {"sha256": digest, **({"whole": True} if whole else {})}, kept)
            offset += len(chunks)
        return results

    def _replace(self, source: str, chunks: list[Chunk], vectors: np.ndarray, entry: dict[str, Any],
                 metadata: dict[str, Any]) -> None:
        """`source`'s chunks become `chunks` (embedded as `vectors`), under new ids."""
        self.delete_source(source)
        ids = list(range(self._next_id, self._next_id + len(chunks)))
        self._next_id += len(chunks)
        if ids:
            self.index.add(np.asarray(ids, dtype=np.int64), vectors)
        for chunk_id, chunk in zip(ids, chunks, strict=True):
            self.chunks[chunk_id] = ChunkRecord(chunk_id, source, chunk.section, chunk.ordinal, chunk.text, metadata)
        self.sources[source] = {**entry, "ids": ids}

    def chunks_of(self, source: str) -> list[ChunkRecord]:
        """`source`'s chunks in document order ([] for an unknown source)."""
        return [self.chunks[i] for i in self.sources.get(source, {}).get("ids", []) if i in self.chunks]

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
        hits = self._nearest(vector, max(top_k * 3, RERANK_POOL) if keys else top_k, min_score)
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

    def search_by_vector(self, vector: Sequence[float] | np.ndarray, top_k: int = 4, *,
                         min_score: float = -1.0) -> list[Hit]:
        """The `top_k` chunks nearest to an embedding of this store's dimension (scaled to unit length), best
        first; no lexical re-ranking, as there are no words to compare."""
        row = np.asarray(vector, dtype=np.float64).reshape(1, -1)
        if row.shape[1] != self.embedder.dim:
            raise ValueError(f"a vector of dimension {row.shape[1]} cannot search an index of dimension "
                             f"{self.embedder.dim}")
        if not self.chunks or not np.any(row):
            return []
        return self._nearest(unit_rows(row), top_k, min_score)

    def _nearest(self, vector: np.ndarray, pool: int, min_score: float) -> list[Hit]:
        scores, ids = self.index.search(vector, pool)
        return [Hit(self.chunks[int(i)], float(s)) for s, i in zip(scores[0], ids[0], strict=True)
                if i >= 0 and int(i) in self.chunks and s >= min_score]

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


def _digest(text: str, metadata: dict[str, Any], *, whole: bool) -> str:
    """What an entry is made of, hashed: a chunked document without metadata hashes its text alone, as indexes
    saved before metadata and whole entries existed did, so re-ingesting them still finds them unchanged."""
    payload = text if not whole and not metadata else json.dumps(
        {"text": text, "metadata": metadata, "whole": whole}, ensure_ascii=False, sort_keys=True)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()
