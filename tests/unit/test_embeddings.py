from __future__ import annotations

import math

from service.ai.embeddings import HashEmbedder, LocalEmbedder


def cos(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


async def test_hash_embedder_is_deterministic_and_unit_length() -> None:
    e = HashEmbedder()
    [a, b, c] = await e.embed(["Prefers dark mode", "prefers DARK mode", "Uses PostgreSQL 16"])
    assert len(a) == 384
    assert math.isclose(math.sqrt(sum(x * x for x in a)), 1.0, rel_tol=1e-9)
    assert a == b
    assert cos(a, c) < 0.5


async def test_local_model_is_semantic_and_offline() -> None:
    e = LocalEmbedder(batch_size=8)
    vecs = await e.embed(["I prefer a dark theme in my editor", "Dark mode is my favourite UI setting",
                          "The invoice is due next Tuesday"])
    assert [len(v) for v in vecs] == [384, 384, 384]
    assert math.isclose(math.sqrt(sum(x * x for x in vecs[0])), 1.0, rel_tol=1e-4)
    assert cos(vecs[0], vecs[1]) > cos(vecs[0], vecs[2]) + 0.2
    assert await e.embed([]) == []
