"""A deterministic feature-hashing embedder (tests and benchmarks): no model, no network."""

from __future__ import annotations

import hashlib
import itertools
import math
import re

import structlog

log = structlog.get_logger(__name__)



class HashEmbedder:
    """Deterministic feature-hashing embedder: word and word-bigram buckets, L2-normalised.

    Not semantic, but texts sharing words are close, which is enough for unit tests and the
    offline fallback of nothing. Never the default.
    """

    _TOKEN = re.compile(r"[a-z0-9]+")

    def __init__(self, dim: int = 384) -> None:
        self.dim = dim
        self.name = f"hash-{dim}"
        self.variant = ""

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

    async def embed_query(self, text: str) -> list[float]:
        return self._one(text)

    async def embed_symmetric(self, texts: list[str]) -> list[list[float]]:
        return [self._one(t) for t in texts]
