"""The write path's embedder in a child process (service/ai/process.py): the same vectors as in process,
concurrent callers answered in order, and a child that dies fails its calls (retryable) and is started again."""

from __future__ import annotations

import asyncio
import os
import signal

import numpy as np
import pytest

from service.ai.embeddings import BatchingEmbedder
from service.ai.process import ProcessEmbedder
from service.core.errors import DependencyUnavailable
from service.core.settings import Settings
from tests.conftest import local_embedder


def close(a: object, b: object) -> bool:
    """The same vectors up to the int8 model's batch effect: its activations are quantized with one scale per batch,
    so a text's vector moves by up to half a percent with the texts it is batched with (docs/decisions.md)."""
    x, y = np.asarray(a), np.asarray(b)
    return bool(x.shape == y.shape and ((x * y).sum(axis=-1) >= 0.99).all())


async def test_child_vectors_match_and_a_dead_child_is_replaced() -> None:
    texts = [f"Prefers tool {i} for data pipelines" for i in range(40)] + ["", "ünïcode ✓"]
    inline = await local_embedder().embed(texts)
    child = ProcessEmbedder(local_embedder().files, batch_size=16, nice=5)
    try:
        batched = BatchingEmbedder(child, max_batch=16)
        got = await asyncio.gather(*(batched.embed([t]) for t in texts))  # concurrent callers, coalesced
        assert close([g[0] for g in got], inline)
        assert child.calls < len(texts)  # coalesced into fewer child calls
        local = local_embedder()
        # each kind of text gets the model's own prefix in the child too
        assert np.allclose(await child.embed_query(texts[0]), await local.embed_query(texts[0]), atol=1e-5)
        assert np.allclose(await child.embed_symmetric(texts[:2]), await local.embed_symmetric(texts[:2]), atol=1e-5)
        assert not np.allclose(await child.embed_query(texts[0]), inline[0], atol=1e-3)

        pid = child._proc.pid
        slow = asyncio.ensure_future(child.embed(texts * 50))  # in flight when the child dies
        await asyncio.sleep(0.2)
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(DependencyUnavailable):
            await asyncio.wait_for(slow, 60)
        again = await child.embed(texts[:3])  # a new child
        assert child._proc.pid != pid
        assert close(again, inline[:3])
    finally:
        await child.close()


def test_where_the_write_path_embeds() -> None:
    def s(**kw: object) -> Settings:
        return Settings(_env_file=None, **kw)  # type: ignore[arg-type, call-arg]

    assert not s(embedder="local").embeds_in_child  # the default: inline
    assert s(embedder="local", embed_process="auto", worker_process="inline").embeds_in_child  # the worker in the API
    assert not s(embedder="local", embed_process="auto").embeds_in_child  # the default worker is a child already
    assert not s(embedder="local", embed_process="auto",
                 qdrant_url="http://127.0.0.1:6333").embeds_in_child  # a worker process of its own
    assert s(embedder="local", qdrant_url="http://127.0.0.1:6333", embed_process="child").embeds_in_child
    assert not s(embedder="local", embed_process="inline").embeds_in_child
    assert not s(embedder="hash").embeds_in_child
