"""Bulk graph writes in chunks sized by time (service/stores/neo4j/chunks.py): splitting, bounds, sizing."""

from __future__ import annotations

import pytest

from service.errors import DependencyUnavailable
from service.stores.neo4j.chunks import ChunkSizer, ChunkStats, ChunkTooSlow, write_chunked


async def answering() -> bool:
    return True


async def silent() -> bool:
    return False


async def test_a_chunk_too_slow_is_split_and_every_item_written_once_in_order() -> None:
    written: list[int] = []
    attempts: list[int] = []

    async def write(chunk: list[int]) -> int:
        attempts.append(len(chunk))
        if len(chunk) > 40:  # what Neo4j cannot finish in time
            raise ChunkTooSlow("TransactionTimedOut", server=True)
        written.extend(chunk)
        return len(chunk)

    stats = ChunkStats()
    sizer = ChunkSizer(target=60.0, size=500)
    results = await write_chunked(list(range(1000)), sizer, write, stats, "test", answering)
    assert written == list(range(1000))
    assert sum(results) == 1000
    assert attempts[:5] == [500, 250, 125, 62, 31]  # halved until it fits
    assert stats.chunks == len(results)
    assert 4 <= stats.splits <= 10  # growing again, it stays under the size that was too slow


async def test_one_item_too_slow_is_unavailable() -> None:
    async def write(chunk: list[int]) -> None:
        raise ChunkTooSlow("TransactionTimedOut", server=True)

    with pytest.raises(DependencyUnavailable):
        await write_chunked([1, 2, 3, 4], ChunkSizer(target=1.0, size=4), write, ChunkStats(), "test", answering)


async def test_a_client_deadline_splits_while_neo4j_answers_and_is_an_outage_when_it_does_not() -> None:
    attempts: list[int] = []

    async def write(chunk: list[int]) -> int:
        attempts.append(len(chunk))
        if len(chunk) > 64:  # a slow link: big transactions pass the client deadline
            raise ChunkTooSlow("client deadline passed", server=False)
        return len(chunk)

    assert sum(await write_chunked(list(range(256)), ChunkSizer(target=1.0, size=256), write, ChunkStats(),
                                   "test", answering)) == 256
    assert attempts[:3] == [256, 128, 64]

    attempts.clear()
    with pytest.raises(DependencyUnavailable):  # no answer to the ping either: an outage, not split further
        await write_chunked(list(range(256)), ChunkSizer(target=1.0, size=256), write, ChunkStats(), "test", silent)
    assert attempts == [256]


def test_the_next_chunk_is_what_the_last_rate_fits_in_the_target_at_most_doubled() -> None:
    sizer = ChunkSizer(target=3.0, size=100)
    sizer.record(100, 6.0)  # 16.7/s: 50 fit in 3 s
    assert sizer.size == 50
    sizer.record(50, 0.01)  # very fast: at most twice the last chunk
    assert sizer.size == 100
    sizer.record(100, 0.0)  # no time measured: still bounded
    assert sizer.size == 200
    assert sizer.split(200) == 100
    sizer.record(100, 0.01)
    assert sizer.size == 150  # 3/4 of the size that was too slow, not twice the last
    big = ChunkSizer(target=3.0, size=1500, high=2000)
    big.record(1500, 0.1)
    assert big.size == 2000
    assert ChunkSizer(target=3.0, size=10).split(1) == 1
