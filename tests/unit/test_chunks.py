"""Bulk graph writes in chunks sized by time (service/stores/neo4j/chunks.py): splitting, bounds, sizing."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from service.core.errors import DependencyUnavailable
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
    sizer = ChunkSizer(target=60.0, start=500)
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
        await write_chunked([1, 2, 3, 4], ChunkSizer(target=1.0, start=4), write, ChunkStats(), "test", answering)


async def test_a_client_deadline_splits_while_neo4j_answers_and_is_an_outage_when_it_does_not() -> None:
    attempts: list[int] = []

    async def write(chunk: list[int]) -> int:
        attempts.append(len(chunk))
        if len(chunk) > 64:  # a slow link: big transactions pass the client deadline
            raise ChunkTooSlow("client deadline passed", server=False)
        return len(chunk)

    assert sum(await write_chunked(list(range(256)), ChunkSizer(target=1.0, start=256), write, ChunkStats(),
                                   "test", answering)) == 256
    assert attempts[:3] == [256, 128, 64]

    attempts.clear()
    with pytest.raises(DependencyUnavailable):  # no answer to the ping either: an outage, not split further
        await write_chunked(list(range(256)), ChunkSizer(target=1.0, start=256), write, ChunkStats(), "test", silent)
    assert attempts == [256]


def test_the_next_chunk_is_what_the_last_rate_fits_in_half_the_target_at_most_doubled() -> None:
    sizer = ChunkSizer(target=3.0, start=100)
    assert sizer.first() == 100
    assert sizer.next(100, 6.0) == 25  # over the target, 16.7/s: 25 fit in half of it (1.5 s)
    assert sizer.next(100, 1.0) == 150  # 100/s: 150 fit in 1.5 s
    assert sizer.next(100, 2.9) == 100  # inside the target, over its half: the size holds
    assert sizer.next(50, 0.01) == 100  # very fast: at most twice the last chunk
    assert sizer.next(100, 0.0) == 200  # no time measured: still bounded
    assert sizer.split(200) == 100
    assert sizer.next(100, 0.01) == 150  # 3/4 of the size that was too slow, not twice the last
    assert ChunkSizer(target=3.0, start=1500, high=2000).next(1500, 0.1) == 2000
    assert ChunkSizer(target=3.0, start=10).split(1) == 1


def test_a_first_chunk_is_the_start_size_and_the_second_may_return_to_the_last_writes_size() -> None:
    sizer = ChunkSizer(target=3.0, start=16)
    assert sizer.first() == 16
    # the last bulk write reached 256, but these items are slow (32/s): 48 fit in half the target
    assert sizer.next(16, 0.5, hint=256) == 48
    assert sizer.next(16, 0.05, hint=256) == 256  # fast items: back to 256 at once
    assert sizer.next(16, 0.1) == 32  # without a hint: doubled
    sizer.split(16)  # 16 was too slow
    assert sizer.first() == 12  # a later bulk write starts under 3/4 of the size that was too slow


async def test_a_bulk_write_starts_small_and_doubles_while_its_chunks_are_fast() -> None:
    attempts: list[int] = []

    async def write(chunk: list[int]) -> int:
        attempts.append(len(chunk))
        return len(chunk)

    async def bulk(n: int) -> list[int]:
        attempts.clear()
        assert sum(await write_chunked(list(range(n)), sizer, write, stats, "test", answering)) == n
        return list(attempts)

    sizer = ChunkSizer(target=60.0, start=16)
    stats = ChunkStats()
    assert await bulk(500) == [16, 32, 64, 128, 256, 4]
    assert sizer.reached == 512
    # the next write starts at 16 again; its first chunk was fast, so the second returns to the 512 reached
    assert await bulk(500) == [16, 484]
    assert await bulk(10) == [10]  # one chunk: says nothing about larger sizes, the 512 stays
    assert await bulk(500) == [16, 484]
    assert [items for _, items, _ in stats.recent] == [16, 32, 64, 128, 256, 4, 16, 484, 10, 16, 484]


async def test_concurrent_bulk_writes_of_one_kind_keep_their_own_sizes() -> None:
    sizes: dict[str, list[int]] = {"a": [], "b": []}

    def writer(name: str) -> Callable[[list[int]], Awaitable[int]]:
        async def write(chunk: list[int]) -> int:
            sizes[name].append(len(chunk))
            await asyncio.sleep(0)  # let the other write run between this one's chunks
            return len(chunk)
        return write

    sizer = ChunkSizer(target=60.0, start=16)
    await asyncio.gather(*(write_chunked(list(range(240)), sizer, writer(name), ChunkStats(), "test", answering)
                           for name in sizes))
    assert sizes == {"a": [16, 32, 64, 128], "b": [16, 32, 64, 128]}
