"""all-MiniLM-L6-v2 on the local embedder (ONNX Runtime, no torch) against the torch model's own vectors, and its
model files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from service.ai.local import (
    COMPATIBLE_VARIANTS,
    MINILM_ID,
    EmbedderConfigError,
    LocalEmbedder,
    ModelFiles,
    length_buckets,
)
from tests.conftest import MODEL_CACHE
from tests.conftest import local_embedder as any_local_embedder


def local_embedder(batch_size: int = 64) -> LocalEmbedder:
    return any_local_embedder(batch_size, MINILM_ID)

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "embedder_fidelity.json"
# Measured with this fixture: min cosine 0.999999+ (fp32 graph vs torch); the floor leaves room for thread-count
# differences in float summation order, far above the 0.998 the compatible variants are held to.
FLOOR = 0.99999


def test_onnx_embedder_reproduces_the_torch_vectors() -> None:
    fixture = json.loads(FIXTURE.read_text(encoding="utf-8"))
    expected = np.array(fixture["vectors"], dtype=np.float32)
    embedder = local_embedder(batch_size=8)
    got = embedder.encode_array(fixture["texts"])
    assert got.shape == expected.shape == (len(fixture["texts"]), 384)
    cosines = (got * expected).sum(axis=1) / np.linalg.norm(expected, axis=1)
    assert cosines.min() >= FLOOR, {t[:40]: round(float(c), 6) for t, c in zip(fixture["texts"], cosines, strict=True)
                                    if c < FLOOR}
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    assert embedder.variant in COMPATIBLE_VARIANTS[MINILM_ID] and "torch" in COMPATIBLE_VARIANTS[MINILM_ID]


def test_batches_do_not_change_vectors() -> None:
    texts = json.loads(FIXTURE.read_text(encoding="utf-8"))["texts"]
    embedder = local_embedder(batch_size=3)
    one_by_one = np.concatenate([embedder.encode_array([t]) for t in texts])
    assert np.allclose(embedder.encode_array(texts), one_by_one, atol=1e-5)


def test_length_buckets_cover_every_text_once_and_limit_padding() -> None:
    lengths = [5, 90, 7, 6, 88, 30, 31, 29, 5, 5, 91, 60] * 7
    buckets = length_buckets(lengths, max_rows=16)
    flat = [i for b in buckets for i in b]
    assert sorted(flat) == list(range(len(lengths)))
    assert all(len(b) <= 16 for b in buckets)
    padded = sum(len(b) * max(lengths[i] for i in b) for b in buckets)
    assert padded <= 1.3 * sum(lengths)  # one batch padded to its longest text would be 2x here
    assert len(length_buckets([], 8)) == 0


def test_a_model_directory_is_loaded_like_the_default(tmp_path: Path) -> None:
    default = ModelFiles.minilm(MODEL_CACHE)
    local_embedder()._load()  # the default graph is built in MODEL_CACHE
    model_dir = tmp_path / "my-minilm"
    (model_dir / "1_Pooling").mkdir(parents=True)
    shutil.copy(default.graph, model_dir / "model.onnx")
    shutil.copy(default.tokenizer, model_dir / "tokenizer.json")
    source = default.build_from
    assert source is not None
    for name in ("1_Pooling/config.json", "modules.json", "sentence_bert_config.json", "config.json"):
        shutil.copy(source / name, model_dir / name)
    files = ModelFiles.from_dir(model_dir)
    assert (files.model_id, files.dim, files.pooling, files.normalize, files.max_length) == (
        "my-minilm", 384, "mean", True, 256)
    texts = ["I prefer dark mode", "The invoice is due next Tuesday"]
    assert np.allclose(LocalEmbedder(files).encode_array(texts), local_embedder().encode_array(texts), atol=1e-5)

    (model_dir / "tokenizer.json").unlink()
    with pytest.raises(EmbedderConfigError, match=r"no tokenizer\.json"):
        ModelFiles.from_dir(model_dir)


def test_a_damaged_graph_is_rebuilt_in_the_cache_and_refused_elsewhere(tmp_path: Path) -> None:
    default = ModelFiles.minilm(MODEL_CACHE)
    local_embedder()._load()
    good = default.graph.read_bytes()
    damaged = tmp_path / default.graph.name
    damaged.write_bytes(good[:-10] + b"0123456789")
    LocalEmbedder(ModelFiles.minilm(tmp_path))._load()  # the model cache's copy is built again from the weights
    assert damaged.read_bytes() == good
    foreign = tmp_path / "model.onnx"  # a file that cannot be rebuilt: refused
    foreign.write_bytes(good[:-10] + b"0123456789")
    pinned = ModelFiles(MINILM_ID, "onnx-fp32", foreign, default.tokenizer, dim=384, sha256=default.sha256)
    with pytest.raises(EmbedderConfigError, match="sha256"):
        LocalEmbedder(pinned)._load()
