"""`VectorIndex`: unit vectors by int64 id in FAISS — exact inner product when small, HNSW when large."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import faiss
import numpy as np

# Below this many vectors an exact scan takes well under a millisecond and needs no tuning.
HNSW_THRESHOLD = 20_000
# HNSW deletes are tombstones filtered at search time; past this share of the index it is rebuilt.
COMPACT_RATIO = 0.2


@dataclass(frozen=True)
class HnswParams:
    """Graph degree and search breadths (benchmarks/rag.py measures the recall/latency trade-off)."""

    m: int = 32
    ef_construction: int = 80
    ef_search: int = 64


class VectorIndex:
    """Inner-product search over unit vectors keyed by int64 ids, with add, delete and save/load.

    `flat` (IndexIDMap2 over IndexFlatIP) is exact and deletes in place. Beyond `hnsw_threshold` live
    vectors it becomes `hnsw` (IndexIDMap2 over IndexHNSWFlat): HNSW cannot remove nodes, so a delete
    is a tombstone excluded from results by an ID selector, and the graph is rebuilt without them once
    they pass COMPACT_RATIO of the index.

    Searches go to the inner index and map positions to ids here: IndexIDMap's own translation opens an
    OpenMP region per call, which on a busy 2-core machine turned 0.2 ms queries into 8 ms ones.
    """

    def __init__(self, dim: int, *, hnsw_threshold: int = HNSW_THRESHOLD, hnsw: HnswParams | None = None) -> None:
        self.dim = dim
        self.hnsw_threshold = hnsw_threshold
        self.hnsw = hnsw or HnswParams()
        self.tombstones: set[int] = set()
        self._index = self._new("flat")
        self._changed()

    def _changed(self) -> None:
        """Forget what was derived from the stored ids (position → id table, tombstone selector)."""
        self._ids: np.ndarray | None = None
        self._selector: tuple[Any, Any] | None = None

    def _id_table(self) -> np.ndarray:
        if self._ids is None:
            self._ids = faiss.vector_to_array(self._index.id_map).astype(np.int64)
        return self._ids

    def _tombstone_selector(self) -> Any:
        """An ID selector that excludes the tombstoned positions, built once per change."""
        if self._selector is None:
            banned = np.flatnonzero(np.isin(self._id_table(), np.fromiter(self.tombstones, np.int64)))
            batch = faiss.IDSelectorBatch(banned.astype(np.int64))
            # FAISS holds a raw pointer to `batch`: keep both alive as long as the selector is used.
            self._selector = (batch, faiss.IDSelectorNot(batch))
        return self._selector[1]

    @property
    def kind(self) -> str:
        return "hnsw" if isinstance(faiss.downcast_index(self._index.index), faiss.IndexHNSW) else "flat"

    def __len__(self) -> int:
        return self._index.ntotal - len(self.tombstones)

    def _new(self, kind: str) -> faiss.IndexIDMap2:
        if kind == "flat":
            return faiss.IndexIDMap2(faiss.IndexFlatIP(self.dim))
        inner = faiss.IndexHNSWFlat(self.dim, self.hnsw.m, faiss.METRIC_INNER_PRODUCT)
        inner.hnsw.efConstruction = self.hnsw.ef_construction
        inner.hnsw.efSearch = self.hnsw.ef_search
        return faiss.IndexIDMap2(inner)

    def _vectors(self, *, live_only: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """All stored (ids, vectors), in insertion order; tombstoned ones left out unless asked for."""
        ids = faiss.vector_to_array(self._index.id_map).astype(np.int64)
        storage = faiss.downcast_index(self._index.index)
        if isinstance(storage, faiss.IndexHNSW):
            storage = faiss.downcast_index(storage.storage)
        vectors = storage.reconstruct_n(0, self._index.ntotal) if len(ids) else np.empty((0, self.dim), "float32")
        if live_only and self.tombstones:
            keep = ~np.isin(ids, np.fromiter(self.tombstones, np.int64))
            ids, vectors = ids[keep], vectors[keep]
        return ids, vectors

    def _rebuild(self, kind: str) -> None:
        ids, vectors = self._vectors()
        self._index, self.tombstones = self._new(kind), set()
        self._changed()
        if len(ids):
            self._index.add_with_ids(vectors, ids)

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        """Add unit vectors (n, dim) under new ids; switches to HNSW when the index grows past the threshold."""
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[1] != self.dim:
            raise ValueError(f"expected vectors of shape (n, {self.dim}), got {vectors.shape}")
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        if self.kind == "flat" and len(self) + len(ids) > self.hnsw_threshold:
            self._rebuild("hnsw")
        if len(ids):
            self._index.add_with_ids(vectors, ids)
        self._changed()

    def remove(self, ids: list[int] | np.ndarray) -> None:
        """Forget these ids (unknown ones are ignored)."""
        ids = np.asarray(ids, dtype=np.int64)
        if not len(ids):
            return
        self._changed()
        if self.kind == "flat":
            self._index.remove_ids(faiss.IDSelectorBatch(ids))
            return
        self.tombstones.update(self._known(ids))
        if len(self.tombstones) > COMPACT_RATIO * self._index.ntotal:
            self._rebuild("hnsw" if len(self) > self.hnsw_threshold else "flat")

    def _known(self, ids: np.ndarray) -> set[int]:
        stored = self._id_table()
        return set(stored[np.isin(stored, ids)].tolist())

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(scores, ids) of the k best matches per query row; missing slots have id -1."""
        queries = np.ascontiguousarray(np.atleast_2d(queries), dtype=np.float32)
        k = max(1, min(k, max(len(self), 1)))
        inner = faiss.downcast_index(self._index.index)
        if self.kind == "flat":
            scores, positions = inner.search(queries, k)
        else:
            # faiss's stubs (1.15) omit SearchParametersHNSW, which the library has
            params = faiss.SearchParametersHNSW(efSearch=max(self.hnsw.ef_search, k))  # type: ignore[attr-defined]
            if self.tombstones:
                params.sel = self._tombstone_selector()
            scores, positions = inner.search(queries, k, params=params)
        table = self._id_table()
        ids = np.where(positions >= 0, table[np.clip(positions, 0, max(len(table) - 1, 0))], -1) if len(table) \
            else np.full_like(positions, -1)
        return scores, ids

    def save(self, path: Path) -> dict[str, Any]:
        """Write the FAISS index to `path`; returns the state that belongs in the store's metadata."""
        faiss.write_index(self._index, str(path))
        return {"kind": self.kind, "dim": self.dim, "hnsw_threshold": self.hnsw_threshold,
                "hnsw": asdict(self.hnsw), "tombstones": sorted(self.tombstones)}

    @classmethod
    def load(cls, path: Path, state: dict[str, Any]) -> VectorIndex:
        """The index saved at `path` with the `state` `save` returned."""
        index = cls(state["dim"], hnsw_threshold=state.get("hnsw_threshold", HNSW_THRESHOLD),
                    hnsw=HnswParams(**state.get("hnsw", {})))
        loaded = faiss.read_index(str(path))
        if not isinstance(loaded, faiss.IndexIDMap2):
            raise ValueError(f"{path} holds a {type(loaded).__name__}, not the IndexIDMap2 this store writes")
        index._index = loaded
        index.tombstones = set(state.get("tombstones", []))
        index._changed()
        if index._index.d != index.dim:
            raise ValueError(f"{path} holds {index._index.d}-dimensional vectors, metadata says {index.dim}")
        inner = faiss.downcast_index(index._index.index)
        if isinstance(inner, faiss.IndexHNSW):
            inner.hnsw.efSearch = index.hnsw.ef_search
        return index
