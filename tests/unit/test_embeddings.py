from __future__ import annotations

import math

import numpy as np
import pytest

from service.ai.embeddings import BatchingEmbedder
from service.ai.hashing import HashEmbedder
from service.ai.local import TextKind
from service.core.embedding_models import MODELS
from tests.conftest import local_embedder

CLS, SEP = 101, 102  # BERT's special tokens (both models use the uncased BERT vocabulary)


def cos(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


async def test_hash_embedder_is_deterministic_and_unit_length() -> None:
    e = HashEmbedder()
    [a, b, c] = await e.embed(["Prefers dark mode", "prefers DARK mode", "Uses PostgreSQL 16"])
    assert len(a) == 384
    assert math.isclose(math.sqrt(sum(x * x for x in a)), 1.0, rel_tol=1e-9)
    assert a == b
    assert cos(a, c) < 0.5


@pytest.mark.parametrize("model", sorted(MODELS))
async def test_local_model_is_semantic_and_offline(model: str) -> None:
    e = local_embedder(batch_size=8, model=model)
    vecs = await e.embed(["I prefer a dark theme in my editor", "Dark mode is my favourite UI setting",
                          "The invoice is due next Tuesday"])
    assert [len(v) for v in vecs] == [384, 384, 384]
    assert math.isclose(math.sqrt(sum(x * x for x in vecs[0])), 1.0, rel_tol=1e-4)
    # a fifth of the model's own range above its unrelated level (e5's cosines of unrelated texts sit near 0.7)
    spread = 1.0 - MODELS[model].calibration.name_floor
    assert cos(vecs[0], vecs[1]) > cos(vecs[0], vecs[2]) + 0.2 * spread
    assert await e.embed([]) == []


async def test_each_kind_of_text_gets_the_models_prefix() -> None:
    e = local_embedder(model="e5-small-v2")
    e._load()
    tok = e._tokenizer
    text = "Prefers window seats"
    plain = tok.encode(text, add_special_tokens=False).ids
    kinds: tuple[tuple[TextKind, str], ...] = (("passage", "passage: "), ("query", "query: "), ("symmetric", "query: "))
    for kind, prefix in kinds:
        [ids] = [enc.ids for enc in e.tokenize([text], kind)]
        assert ids == [CLS, *tok.encode(prefix, add_special_tokens=False).ids, *plain, SEP], kind
    passage, query, names = await e.embed([text]), await e.embed_query(text), await e.embed_symmetric([text])
    assert np.allclose(passage[0], e.encode_array([text], "passage")[0])
    assert np.allclose(query, names[0])  # e5: "query: " on both sides of a symmetric comparison
    assert not np.allclose(passage[0], query, atol=1e-3)
    minilm = local_embedder(model="all-MiniLM-L6-v2")  # trained without prefixes: none on any path
    minilm._load()
    [ids] = [enc.ids for enc in minilm.tokenize([text], "query")]
    assert ids == [CLS, *minilm._tokenizer.encode(text, add_special_tokens=False).ids, SEP]
    assert np.allclose(await minilm.embed_query(text), (await minilm.embed([text]))[0], atol=1e-6)


class CountingEmbedder(HashEmbedder):
    """The real hash embedder, counting how often it is called."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[int] = []
        self.fail = False

    async def embed(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(len(texts))
        if self.fail:
            raise RuntimeError("model exploded")
        return await super().embed(texts)


async def test_batching_embedder_coalesces_concurrent_calls_in_order() -> None:
    import asyncio

    inner = CountingEmbedder()
    batcher = BatchingEmbedder(inner, max_batch=8)
    texts = [[f"text {i}"] for i in range(20)] + [["a", "b"]]
    results = await asyncio.gather(*[batcher.embed(t) for t in texts])
    expected = [await HashEmbedder().embed(t) for t in texts]
    assert results == expected
    assert sum(inner.calls) == 22
    assert max(inner.calls) <= 8
    assert len(inner.calls) <= 4  # 21 callers, 22 texts, batches of at most 8
    assert batcher.name == inner.name and batcher.dim == 384


async def test_batching_embedder_hands_errors_to_every_caller() -> None:
    import asyncio

    import pytest

    inner = CountingEmbedder()
    inner.fail = True
    batcher = BatchingEmbedder(inner)
    outcomes = await asyncio.gather(*[batcher.embed([str(i)]) for i in range(3)], return_exceptions=True)
    assert all(isinstance(o, RuntimeError) for o in outcomes)
    inner.fail = False
    assert len(await batcher.embed(["ok"])) == 1
    with pytest.raises(RuntimeError):
        inner.fail = True
        await batcher.embed(["again"])


@pytest.mark.parametrize(("model", "floor"), [("e5-small-v2", 0.99), ("all-MiniLM-L6-v2", 0.99999)])
def test_a_texts_vector_barely_depends_on_its_batch(model: str, floor: float) -> None:
    """e5-small-v2's int8 graph quantizes activations with one scale per batch: a text's vector moves by up to half
    a percent with the texts beside it (measured min cosine 0.9957); the fp32 MiniLM graph is batch-invariant."""
    e = local_embedder(batch_size=16, model=model)
    texts = [f"Prefers tool {i} for data pipelines" for i in range(40)] + ["", "ünïcode ✓",
                                                                         "a longer sentence about a deploy on Friday"]
    batched = e.encode_array(texts)
    alone = np.concatenate([e.encode_array([t]) for t in texts])
    assert (batched * alone).sum(axis=1).min() >= floor
