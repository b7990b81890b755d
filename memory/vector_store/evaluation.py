"""Measuring retrieval: recall@k of a store on labelled query → passage cases (used by tests and benchmarks)."""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from reactgraph.memory.vector_store.embedders import Embedder
from reactgraph.memory.vector_store.store import Hit, VectorStore

_CJK = re.compile(r"[\u3400-\u9fff]")


@dataclass(frozen=True)
class RetrievalCase:
    """A query and the passages that answer it: (source file name, a phrase the right chunk contains).

    No passages means nothing in the corpus answers it: such cases calibrate the relevance threshold.
    """

    query: str
    relevant: tuple[tuple[str, str], ...]

    @property
    def lang(self) -> str:
        return "zh" if _CJK.search(self.query) else "en"

    def answered_by(self, hit: Hit) -> bool:
        name = Path(hit.chunk.source).name
        return any(name == source and phrase in hit.chunk.text for source, phrase in self.relevant)


@dataclass
class RetrievalReport:
    """recall@k overall and by language, MRR, and the score ranges that set the relevance threshold."""

    k: int
    recall: float
    recall_by_lang: dict[str, float]
    mrr: float
    misses: list[str] = field(default_factory=list)
    answered_top1: list[float] = field(default_factory=list)  # top score of each answered query
    unanswerable_top1: list[float] = field(default_factory=list)  # top score of each query with no answer

    def summary(self) -> str:
        langs = " ".join(f"{lang}={value:.3f}" for lang, value in sorted(self.recall_by_lang.items()))
        answered = (f"answered top-1 score p10={_quantile(self.answered_top1, 0.1):.3f} "
                    f"min={min(self.answered_top1, default=0):.3f}")
        unanswerable = f"unanswerable top-1 max={max(self.unanswerable_top1, default=0):.3f}"
        return f"recall@{self.k}={self.recall:.3f} ({langs}) MRR={self.mrr:.3f}; {answered}; {unanswerable}"


def _quantile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[max(0, min(98, round(q * 100) - 1))]


def load_cases(path: Path) -> list[RetrievalCase]:
    """Cases from a JSON-lines file of {"query": …, "relevant": [[source, phrase], …]}."""
    cases = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.strip():
            item = json.loads(line)
            cases.append(RetrievalCase(item["query"], tuple(tuple(pair) for pair in item["relevant"])))
    return cases


def build_store(embedder: Embedder, documents: Mapping[str, str]) -> VectorStore:
    """An in-memory store of `documents` (source → text)."""
    store = VectorStore(embedder)
    for source, text in documents.items():
        store.add_document(source, text, markdown=source.endswith((".md", ".markdown")))
    return store


def read_corpus(*directories: Path) -> dict[str, str]:
    """Documents by file name: the .md and .txt files of these directories, plus {"source", "text"} lines of
    their .jsonl files (many small documents in one file, e.g. unlabelled distractors)."""
    documents = {}
    for directory in directories:
        for path in sorted(Path(directory).glob("*")):
            if path.suffix in (".md", ".txt"):
                documents[path.name] = path.read_text(encoding="utf-8")
            elif path.suffix == ".jsonl":
                for line in path.read_text(encoding="utf-8").splitlines():
                    item = json.loads(line)
                    documents[item["source"]] = item["text"]
    return documents


def evaluate(store: VectorStore, cases: Iterable[RetrievalCase], k: int = 5) -> RetrievalReport:
    """Share of answerable cases whose answering chunk is in the top k; plus MRR and score ranges."""
    found: dict[str, list[bool]] = {}
    reciprocal: list[float] = []
    report = RetrievalReport(k, 0.0, {}, 0.0)
    for case in cases:
        hits = store.search(case.query, k)
        top = hits[0].score if hits else 0.0
        if not case.relevant:
            report.unanswerable_top1.append(top)
            continue
        rank = next((i for i, hit in enumerate(hits, 1) if case.answered_by(hit)), None)
        found.setdefault(case.lang, []).append(rank is not None)
        reciprocal.append(1 / rank if rank else 0.0)
        if rank is None:
            report.misses.append(case.query)
        else:
            report.answered_top1.append(top)
    everything = [hit for values in found.values() for hit in values]
    report.recall = sum(everything) / max(len(everything), 1)
    report.recall_by_lang = {lang: sum(values) / len(values) for lang, values in found.items()}
    report.mrr = sum(reciprocal) / max(len(reciprocal), 1)
    return report
