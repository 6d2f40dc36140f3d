"""Build an fp32 ONNX graph of a BERT sentence encoder (all-MiniLM-L6-v2) from its safetensors, without torch; or
of an MPNet one (all-mpnet-base-v2: `model_type` "mpnet" in its config.json).

The graph takes `input_ids`, `attention_mask` and (BERT only) `token_type_ids` (int64, [batch, sequence]) and returns
`last_hidden_state` ([batch, sequence, hidden]), the same interface as an optimum/sentence-transformers ONNX
export, so `service.ai.local.OnnxEmbedder` runs either. Pooling and normalisation stay outside the graph. MPNet
differs from BERT in three places: positions count from its padding id + 1 over the attended tokens, there are no
token types, and every layer's attention scores add a bias learned per head for bucketed relative distances
(computed here once for every pair of positions up to the model's length, and sliced to the batch's).

    python -m service.ai.onnx_build MODEL_DIR OUT.onnx     (MODEL_DIR: config.json + model.safetensors)
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

OPSET = 17  # LayerNormalization


def build(model_dir: Path, out: Path) -> str:
    """Write the graph to `out`; returns its sha256 (deterministic for the same weights and onnx version)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from safetensors.numpy import load_file

    config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    weights: dict[str, np.ndarray[Any, Any]] = load_file(str(model_dir / "model.safetensors"))
    hidden = int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    head_dim = hidden // heads
    eps = float(config.get("layer_norm_eps", 1e-12))
    mpnet = config.get("model_type") == "mpnet"
    prefix = next((p for p in ("bert.", "mpnet.") if f"{p}embeddings.word_embeddings.weight" in weights), "")
    names = (("attn.q", "attn.k", "attn.v", "attn.o", "LayerNorm") if mpnet
             else ("self.query", "self.key", "self.value", "output.dense", "output.LayerNorm"))

    nodes: list[Any] = []
    inits: list[Any] = []

    def const(name: str, value: np.ndarray[Any, Any]) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def weight(key: str, transpose: bool = False) -> str:
        value = weights[prefix + key].astype(np.float32)
        return const(key + (".T" if transpose else ""), value.T if transpose else value)

    counter = iter(range(10**6))

    def op(kind: str, inputs: list[str], **attrs: Any) -> str:
        name = f"{kind.lower()}_{next(counter)}"
        nodes.append(helper.make_node(kind, inputs, [name], name=name, **attrs))
        return name

    def linear(x: str, key: str) -> str:
        return op("Add", [op("MatMul", [x, weight(f"{key}.weight", transpose=True)]), weight(f"{key}.bias")])

    def layer_norm(x: str, key: str) -> str:
        return op("LayerNormalization", [x, weight(f"{key}.weight"), weight(f"{key}.bias")], axis=-1, epsilon=eps)

    # embeddings: word + position (+ token type), then LayerNorm
    seq_len = op("Shape", ["input_ids"], start=1, end=2)
    if mpnet:  # positions: padding id + 1, + 2, ... over the attended tokens; the padding id at padding
        attended = op("CumSum", ["attention_mask", const("axis1", np.array(1))])
        pad = const("pad_id", np.array(int(config.get("pad_token_id", 1)), np.int64))
        position_ids = op("Add", [op("Mul", [attended, "attention_mask"]), pad])
        positions = op("Gather", [weight("embeddings.position_embeddings.weight"), position_ids])
    else:
        positions = op("Slice", [weight("embeddings.position_embeddings.weight"), const("zero", np.array([0])), seq_len,
                                 const("axis0", np.array([0]))])
    x = op("Add", [op("Gather", [weight("embeddings.word_embeddings.weight"), "input_ids"]), positions])
    if not mpnet:
        x = op("Add", [x, op("Gather", [weight("embeddings.token_type_embeddings.weight"), "token_type_ids"])])
    x = layer_norm(x, "embeddings.LayerNorm")

    # attention bias: 0 where attended, a large negative number at padding, shaped [batch, 1, 1, sequence]
    mask = op("Cast", [op("Unsqueeze", ["attention_mask", const("axes12", np.array([1, 2]))])], to=TensorProto.FLOAT)
    bias = op("Mul", [op("Sub", [const("one", np.array(1.0, np.float32)), mask]),
                      const("neg", np.array(np.finfo(np.float32).min, np.float32))])
    if mpnet:  # + the relative position bias, [1, heads, sequence, sequence]
        table = relative_bias(weights[prefix + "encoder.relative_attention_bias.weight"].astype(np.float32),
                              int(config["max_position_embeddings"]) - 2,
                              int(config.get("relative_attention_num_buckets", 32)))
        rel = op("Slice", [const("relative_bias", table), const("zeros2", np.array([0, 0])),
                           op("Concat", [seq_len, seq_len], axis=0), const("axes12_slice", np.array([1, 2]))])
        bias = op("Add", [bias, op("Unsqueeze", [rel, const("axis0", np.array([0]))])])
    split = const("split_heads", np.array([0, 0, heads, head_dim]))
    merge = const("merge_heads", np.array([0, 0, hidden]))
    scale = const("scale", np.array(1.0 / np.sqrt(head_dim), np.float32))
    half = const("half", np.array(0.5, np.float32))
    sqrt2 = const("sqrt2", np.array(np.sqrt(2.0), np.float32))

    for i in range(int(config["num_hidden_layers"])):
        key = f"encoder.layer.{i}"

        def heads_of(name: str, key: str = key, x: str = x) -> str:
            return op("Transpose", [op("Reshape", [linear(x, f"{key}.attention.{name}"), split])],
                      perm=[0, 2, 1, 3])

        q, k, v = (heads_of(n) for n in names[:3])
        scores = op("Add", [op("Mul", [op("MatMul", [q, op("Transpose", [k], perm=[0, 1, 3, 2])]), scale]), bias])
        context = op("MatMul", [op("Softmax", [scores], axis=-1), v])
        context = op("Reshape", [op("Transpose", [context], perm=[0, 2, 1, 3]), merge])
        x = layer_norm(op("Add", [linear(context, f"{key}.attention.{names[3]}"), x]), f"{key}.attention.{names[4]}")
        h = linear(x, f"{key}.intermediate.dense")
        h = op("Mul", [op("Mul", [h, half]), op("Add", [op("Erf", [op("Div", [h, sqrt2])]), const(f"one_{i}", np.array(
            1.0, np.float32))])])
        x = layer_norm(op("Add", [linear(h, f"{key}.output.dense"), x]), f"{key}.output.LayerNorm")

    nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="output"))
    ints = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "sequence"])
            for n in ("input_ids", "attention_mask", *(() if mpnet else ("token_type_ids",)))]
    outs = [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", hidden])]
    graph = helper.make_graph(nodes, "bert_encoder", ints, outs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="memory-platform")
    model.ir_version = 8
    onnx.checker.check_model(model)
    data = model.SerializeToString()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def relative_bias(weight: np.ndarray[Any, Any], length: int, buckets: int,
                  max_distance: int = 128) -> np.ndarray[Any, Any]:
    """MPNet's attention bias for every pair of positions up to `length`: [heads, length, length]. Distances are
    bucketed as in T5 (both directions; exact up to buckets/4, then logarithmic up to `max_distance`)."""
    relative = np.arange(length)[None, :] - np.arange(length)[:, None]  # key position - query position
    n = -relative
    half = buckets // 2
    bucket = (n < 0).astype(np.int64) * half
    n = np.abs(n)
    exact = half // 2
    with np.errstate(divide="ignore"):
        large = exact + (np.log(np.maximum(n, 1) / exact) / np.log(max_distance / exact)
                         * (half - exact)).astype(np.int64)
    bucket += np.where(n < exact, n, np.minimum(large, half - 1))
    table: np.ndarray[Any, Any] = weight[bucket].transpose(2, 0, 1).astype(np.float32)
    return table


if __name__ == "__main__":  # pragma: no cover - a command
    print(build(Path(sys.argv[1]), Path(sys.argv[2])))
