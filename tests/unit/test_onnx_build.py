"""The ONNX graph builder (service/ai/onnx_build.py) against a plain numpy forward of the same weights: a tiny MPNet
with random weights (positions from the attention mask, the relative position bias per head), padded batches."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest
from safetensors.numpy import save_file

from service.ai.onnx_build import build, relative_bias

HIDDEN, HEADS, LAYERS, INNER, VOCAB, POSITIONS, BUCKETS, PAD = 16, 4, 2, 32, 50, 66, 32, 1


def _layer_norm(x: np.ndarray[Any, Any], w: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    mean = x.mean(-1, keepdims=True)
    out: np.ndarray[Any, Any] = (x - mean) / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + 1e-5) * w + b
    return out


def _bucket(distance: int) -> int:
    """T5's bucket of one relative distance (key - query), written out as in the MPNet paper's code, scalar."""
    n, half = -distance, BUCKETS // 2
    out = half if n < 0 else 0
    n, exact = abs(n), half // 2
    if n < exact:
        return out + n
    return out + min(half - 1, exact + int(math.log(n / exact) / math.log(128 / exact) * (half - exact)))


def _forward(w: dict[str, np.ndarray[Any, Any]], ids: np.ndarray[Any, Any],
             mask: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    batch, length = ids.shape
    positions = np.cumsum(mask, 1) * mask + PAD
    x = _layer_norm(w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][positions],
                    w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
    buckets = np.array([[_bucket(k - q) for k in range(length)] for q in range(length)])
    bias = w["encoder.relative_attention_bias.weight"][buckets].transpose(2, 0, 1)[None]
    bias = bias + (1.0 - mask[:, None, None, :]) * -1e9
    d = HIDDEN // HEADS
    for i in range(LAYERS):
        p = f"encoder.layer.{i}."

        def lin(v: np.ndarray[Any, Any], key: str, p: str = p) -> np.ndarray[Any, Any]:
            out: np.ndarray[Any, Any] = v @ w[p + key + ".weight"].T + w[p + key + ".bias"]
            return out

        q, k, v = (lin(x, f"attention.attn.{n}").reshape(batch, length, HEADS, d).transpose(0, 2, 1, 3) for n in "qkv")
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d) + bias
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, length, HIDDEN)
        x = _layer_norm(lin(context, "attention.attn.o") + x, w[p + "attention.LayerNorm.weight"],
                        w[p + "attention.LayerNorm.bias"])
        h = lin(x, "intermediate.dense")
        h = 0.5 * h * (1 + np.vectorize(math.erf)(h / math.sqrt(2)))
        x = _layer_norm(lin(h, "output.dense") + x, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])
    return x


@pytest.fixture(scope="module")
def tiny_mpnet(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, np.ndarray[Any, Any]]]:
    rng = np.random.default_rng(7)
    shapes = {"embeddings.word_embeddings.weight": (VOCAB, HIDDEN),
              "embeddings.position_embeddings.weight": (POSITIONS, HIDDEN),
              "embeddings.LayerNorm.weight": (HIDDEN,), "embeddings.LayerNorm.bias": (HIDDEN,),
              "encoder.relative_attention_bias.weight": (BUCKETS, HEADS)}
    for i in range(LAYERS):
        p = f"encoder.layer.{i}."
        for n in "qkvo":
            shapes |= {p + f"attention.attn.{n}.weight": (HIDDEN, HIDDEN), p + f"attention.attn.{n}.bias": (HIDDEN,)}
        shapes |= {p + "attention.LayerNorm.weight": (HIDDEN,), p + "attention.LayerNorm.bias": (HIDDEN,),
                   p + "intermediate.dense.weight": (INNER, HIDDEN), p + "intermediate.dense.bias": (INNER,),
                   p + "output.dense.weight": (HIDDEN, INNER), p + "output.dense.bias": (HIDDEN,),
                   p + "output.LayerNorm.weight": (HIDDEN,), p + "output.LayerNorm.bias": (HIDDEN,)}
    weights = {k: rng.normal(0, 0.5, s).astype(np.float32) for k, s in shapes.items()}
    root = tmp_path_factory.mktemp("mpnet")
    save_file(weights, str(root / "model.safetensors"))
    (root / "config.json").write_text(json.dumps({
        "model_type": "mpnet", "hidden_size": HIDDEN, "num_attention_heads": HEADS, "num_hidden_layers": LAYERS,
        "intermediate_size": INNER, "vocab_size": VOCAB, "max_position_embeddings": POSITIONS, "pad_token_id": PAD,
        "layer_norm_eps": 1e-5, "relative_attention_num_buckets": BUCKETS}))
    return root, weights


def test_the_mpnet_graph_computes_what_the_model_does(tiny_mpnet: tuple[Path, dict[str, np.ndarray[Any, Any]]],
                                                      tmp_path: Path) -> None:
    root, weights = tiny_mpnet
    build(root, tmp_path / "model.onnx")
    session = ort.InferenceSession(str(tmp_path / "model.onnx"), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == ["input_ids", "attention_mask"]  # MPNet has no token types
    rng = np.random.default_rng(1)
    for lengths in ([5], [9, 3, 1], [40, 17]):  # distances past the exact buckets (8) reach the logarithmic ones
        width = max(lengths)
        ids = np.full((len(lengths), width), PAD, np.int64)
        mask = np.zeros_like(ids)
        for row, n in enumerate(lengths):
            ids[row, :n] = rng.integers(3, VOCAB, n)
            mask[row, :n] = 1
        [got] = session.run(None, {"input_ids": ids, "attention_mask": mask})
        want = _forward(weights, ids, mask)
        attended = mask.astype(bool)
        np.testing.assert_allclose(got[attended], want[attended], rtol=1e-4, atol=1e-4)


def test_the_relative_bias_buckets_distances_both_ways() -> None:
    weight = np.arange(BUCKETS * HEADS, dtype=np.float32).reshape(BUCKETS, HEADS)
    table = relative_bias(weight, 200, BUCKETS)
    assert table.shape == (HEADS, 200, 200)
    for q, k in ((0, 0), (0, 7), (7, 0), (0, 8), (3, 50), (50, 3), (0, 127), (0, 128), (0, 199), (199, 0)):
        assert table[0, q, k] == weight[_bucket(k - q), 0], (q, k)
    assert table[0, 0, 1] != table[0, 1, 0]  # before and after are different buckets
