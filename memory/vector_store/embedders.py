"""Embedders: text to unit float32 rows of a fixed dimension, with an identity that changes when the vectors would
(an index built with one model must not be searched with another) — the offline `HashingEmbedder` (the default: it
hashes character and word n-grams, no model, no download), and any LangChain `Embeddings` as the vector store's
embedder (`LangChainEmbedder`, `OpenAIEmbedder` on it).

With LangChain's embeddings the store, its index format and `rag_search` stay ours, the vectors come from the
model the user already has (`HuggingFaceEmbeddings`, `OllamaEmbeddings`, …). They return plain float lists of
any norm; queries go through `embed_query`, documents through `embed_documents`, since some models embed the two
differently.
"""

from __future__ import annotations

import math
import os
import re
import unicodedata
import zlib
from collections import defaultdict
from collections.abc import Sequence
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np
from langchain_core.embeddings import Embeddings

EMBEDDER_ENV = "REACTGRAPH_EMBEDDER"
_CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_WORD = re.compile(r"[a-z0-9]+(?:[-_.'][a-z0-9]+)*")
# Function words carry no topic; dropping them keeps short queries from matching on "the" or "的".
_EN_STOP = frozenset("""
a an the is are was were be been being am of in on at to for from by with about as and or not no nor
what which who whom whose when where why how do does did can could would should will shall may might must
i me my we our us you your it its this that these those there here they them their he she his her him
than then so if into out over under also just only very too more most some any each such please tell
""".split())
_CJK_STOP = frozenset("的了是在和与及或也就都而吗呢吧啊呀么个这那有把被对从以为之其")


@runtime_checkable
class Embedder(Protocol):
    """What the vector store needs: a stable identity and unit vectors of a fixed dimension."""

    name: str
    dim: int

    def params(self) -> dict[str, Any]:
        """Everything that changes the vectors; an index built with other params cannot be searched."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), dim) float32 rows of unit length (all zeros for a text with no features)."""


def signature(embedder: Embedder) -> dict[str, Any]:
    """The identity stored with an index: name, dimension and parameters."""
    return {"name": embedder.name, "dim": embedder.dim, "params": embedder.params()}


def describe(sig: dict[str, Any], other: dict[str, Any] | None = None) -> str:
    """"hashing-ngram(dim=1024)": a signature in a short phrase; parameters appear only where it and
    `other` agree on name and dimension, and then only those that differ."""
    params = sig.get("params", {})
    if other and (other.get("name"), other.get("dim")) == (sig.get("name"), sig.get("dim")):
        theirs = other.get("params", {})
        shown = ", ".join(f"{k}={params.get(k)}" for k in sorted(set(params) | set(theirs))
                          if params.get(k) != theirs.get(k))
        return f"{sig.get('name')}(dim={sig.get('dim')}{', ' + shown if shown else ''})"
    return f"{sig.get('name')}(dim={sig.get('dim')})"


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (all-zero rows stay zero), as float32."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return (matrix / np.where(norms == 0, 1.0, norms)).astype(np.float32)


class HashingEmbedder:
    """Signed feature hashing of CJK character n-grams and Latin word n-grams (+ in-word character n-grams).

    Chinese has no spaces, so its runs become overlapping character 1- and 2-grams; English becomes words
    and character 4-grams inside words (so "ingest" meets "ingestion"). Each feature adds
    ±weight·(1 + log tf) at a crc32-chosen coordinate; the vector is l2-normalised, so inner product is
    a cosine. Deterministic across processes and machines, and needs no model.
    """

    name = "hashing-ngram"
    # Scores below this are noise for this embedder: measured on tests/data/retrieval, unanswerable queries
    # top out near it while most answered ones score above (benchmarks/rag.py prints both).
    relevance_floor = 0.15

    # Defaults chosen by recall@5 and MRR on tests/data/retrieval (benchmarks/rag.py prints the comparison).
    def __init__(self, dim: int = 1024, *, cjk_ngrams: tuple[int, int] = (1, 2), word_ngrams: tuple[int, int] = (1, 1),
                 subword: int = 4, cjk_unigram_weight: float = 1.0, subword_weight: float = 0.3,
                 seed: int = 0) -> None:
        if dim < 16:
            raise ValueError("dim must be at least 16")
        self.dim = dim
        self.cjk_ngrams, self.word_ngrams, self.subword = tuple(cjk_ngrams), tuple(word_ngrams), subword
        self.cjk_unigram_weight, self.subword_weight = cjk_unigram_weight, subword_weight
        # Another seed moves every feature to other coordinates: collisions differ, quality should not.
        self.seed = seed
        self._salt = f"{seed}|".encode() if seed else b""

    def params(self) -> dict[str, Any]:
        return {"cjk_ngrams": list(self.cjk_ngrams), "word_ngrams": list(self.word_ngrams), "subword": self.subword,
                "cjk_unigram_weight": self.cjk_unigram_weight, "subword_weight": self.subword_weight,
                "seed": self.seed, "version": 1}

    def features(self, text: str) -> dict[str, float]:
        """Weighted features of one text (feature → summed weight); exposed for tests and tuning."""
        text = unicodedata.normalize("NFKC", text).casefold()
        weights: defaultdict[str, float] = defaultdict(float)
        low, high = self.cjk_ngrams
        for run in _CJK_RUN.findall(text):
            for n in range(low, high + 1):
                for i in range(len(run) - n + 1):
                    gram = run[i:i + n]
                    if n == 1:
                        if gram not in _CJK_STOP:
                            weights[f"c:{gram}"] += self.cjk_unigram_weight
                    elif not (gram[0] in _CJK_STOP and gram[-1] in _CJK_STOP):
                        weights[f"c:{gram}"] += 1.0
        words = [w for w in _WORD.findall(_CJK_RUN.sub(" ", text)) if w not in _EN_STOP]
        low, high = self.word_ngrams
        for n in range(low, high + 1):
            for i in range(len(words) - n + 1):
                weights["w:" + " ".join(words[i:i + n])] += 1.0
        if self.subword:
            for word in words:
                padded = f"<{word}>"
                for i in range(len(padded) - self.subword + 1):
                    weights[f"s:{padded[i:i + self.subword]}"] += self.subword_weight
        return weights

    def lexical_keys(self, text: str) -> set[str]:
        """Its words and CJK character bigrams: what the store's exact-overlap re-ranking compares."""
        return {f for f in self.features(text) if f.startswith("w:") or (f.startswith("c:") and len(f) == 4)}

    def _vector(self, text: str, out: np.ndarray) -> None:
        counts = self.features(text)
        for feature, weight in counts.items():
            h = zlib.crc32(self._salt + feature.encode("utf-8"))
            # Sublinear in repetition: a word said ten times is not ten times the topic.
            value = (1.0 + math.log(weight)) if weight >= 1 else weight
            out[h % self.dim] += value if (h >> 31) & 1 else -value

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        matrix = np.zeros((len(texts), self.dim), dtype=np.float64)
        for row, text in zip(matrix, texts, strict=True):
            self._vector(text, row)
        return unit_rows(matrix)


def embedder_from_spec(spec: str | None = None) -> Embedder:
    """`hashing` (default), `hashing:<dim>` or `openai:<model>`; None reads $REACTGRAPH_EMBEDDER."""
    spec = (spec if spec is not None else os.environ.get(EMBEDDER_ENV, "")).strip() or "hashing"
    kind, _, arg = spec.partition(":")
    if kind == "hashing":
        try:
            return HashingEmbedder(int(arg)) if arg else HashingEmbedder()
        except ValueError as exc:
            raise ValueError(f"bad embedder spec {spec!r}: {exc}") from exc
    if kind == "openai":
        return OpenAIEmbedder(arg or "text-embedding-3-small")
    raise ValueError(f"unknown embedder {spec!r}: use hashing, hashing:<dim> or openai:<model>")


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
