"""Bulk graph writes in chunks whose size follows measured time.

A bulk write (a large upsert, an import, a reconcile replay, a batch removal) is cut into chunks, one transaction
each. Every bulk write starts with a small chunk (`start`): what its items cost is unknown until some of them are
measured, and it can be many times what earlier writes cost (a fresh user's memories, whose names are all new: each
one embedded and checked by the resolution gate). `target` is the time a chunk may take; chunks are sized for half of
it, so that items dearer than the last chunk's (new names come in bursts) stay inside it. A chunk that took at most
half the target grows to what its time per item fits in that half, at most twice its size: sizes double while the
doubled chunk is predicted to fit, then follow the measured rate. A chunk between half and the whole target keeps its
size (a transaction's fixed cost, the round trips and the commit, can be a second on a loaded machine: shrinking on
it would cut chunks down to one item for no gain); one over the target shrinks to what its rate fits in the half.
Between bulk writes of one store only two sizes carry over: one that was too
slow (`ceiling`), and the size the last write of several chunks reached (`reached`), which the second chunk may
take at once when the first chunk's time per item says it fits (a stream of bulk writes of similar items, such as
coalesced jobs, then costs one more transaction each, not five). A chunk that was too slow (the server ended its
transaction at its timeout, the client deadline passed while Neo4j still answers a trivial query, or Neo4j's
transaction memory ran out) was rolled back; it is split in half and the halves are written, down to a single item.
Every write of the store is idempotent (MERGE on ids and keys), so a retried half converges.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import structlog

from service.core.errors import DependencyUnavailable

log = structlog.get_logger(__name__)

_T = TypeVar("_T")
_R = TypeVar("_R")

class ChunkTooSlow(Exception):
    """A chunk's transaction did not finish in time (rolled back); `server` when Neo4j itself ended it."""

    def __init__(self, reason: str, *, server: bool) -> None:
        super().__init__(reason)
        self.server = server


@dataclass
class ChunkSizer:
    """Chunk sizes of one kind of bulk write, and what carries over between bulk writes of that kind (several
    may run at once: each one's current size is its own, in `write_chunked`)."""

    target: float  # seconds a chunk may take; sizes aim at half of it
    start: int  # the first chunk of every bulk write
    low: int = 1
    high: int = 2000
    ceiling: int | None = None  # a size that was too slow lately: sizes stay under 3/4 of it (relaxing slowly)
    reached: int = 0  # the largest size the measured rates allowed in the last bulk write of several chunks

    def first(self) -> int:
        """A bulk write's first chunk: `start` (under the ceiling), whatever earlier writes measured."""
        return self._capped(self.start)

    def next(self, items: int, seconds: float, hint: int = 0) -> int:
        """A chunk of `items` took `seconds`. At most half the target: the next one is what that time per item
        fits in half the target, at most twice `items` or `hint` (after a bulk write's first chunk: the size the
        last one reached). Up to the target: the same size. Over it: what the time per item fits in the half."""
        aim = self.target / 2
        fits = int(items * aim / max(seconds, 1e-3))
        if seconds <= aim:
            size = min(self.high, max(2 * max(items, 1), hint), fits)
        elif seconds <= self.target:
            size = items
        else:
            size = fits
        size = self._capped(size)
        if self.ceiling is not None:
            self.ceiling = self.ceiling * 21 // 20 + 1  # +5% per chunk that fitted
        return size

    def split(self, items: int) -> int:
        """A chunk of `items` was too slow: the size of its halves."""
        self.ceiling = items if self.ceiling is None else min(self.ceiling, items)
        return max(self.low, items // 2)

    def _capped(self, size: int) -> int:
        if self.ceiling is not None:
            size = min(size, self.ceiling * 3 // 4)
        return max(self.low, size)


@dataclass
class ChunkStats:
    chunks: int = 0  # transactions committed
    splits: int = 0  # chunks that were too slow and were split
    slowest: float = 0.0  # seconds of the slowest committed chunk
    # (kind, items, seconds) of the latest committed chunks, oldest first
    recent: deque[tuple[str, int, float]] = field(default_factory=lambda: deque(maxlen=256), repr=False)


async def write_chunked(items: Sequence[_T], sizer: ChunkSizer, write: Callable[[list[_T]], Awaitable[_R]],
                        stats: ChunkStats, what: str, alive: Callable[[], Awaitable[bool]]) -> list[_R]:
    """`write(chunk)` over consecutive chunks of `items`, sized by `sizer`; a too-slow chunk is split and
    retried. Raises DependencyUnavailable when a single item is too slow, or when the client deadline passed
    and `alive()` (a trivial query) says Neo4j does not answer either: an outage, which splitting would only
    prolong."""
    results: list[_R] = []
    done = 0
    size, hint, reached = sizer.first(), sizer.reached, 0
    # bounded: each item is written once, and a chunk can be split at most log2(size) times
    for _ in range(4 * len(items) + 64):
        if done >= len(items):
            return results
        chunk = list(items[done : done + size])
        started = time.perf_counter()
        try:
            results.append(await write(chunk))
        except ChunkTooSlow as exc:
            if len(chunk) <= 1 or (not exc.server and not await alive()):
                raise DependencyUnavailable(f"neo4j {what}: a chunk of {len(chunk)} did not finish in time ({exc})"
                                            ) from exc
            stats.splits += 1
            size = sizer.split(len(chunk))
            log.warning("graph_chunk_split", what=what, items=len(chunk), next=size, reason=str(exc)[:200])
            continue
        seconds = time.perf_counter() - started
        stats.chunks += 1
        stats.slowest = max(stats.slowest, seconds)
        stats.recent.append((what, len(chunk), seconds))
        size, hint = sizer.next(len(chunk), seconds, hint), 0
        reached = max(reached, size)
        done += len(chunk)
        if done >= len(items) > len(chunk):  # a write of one chunk says nothing about larger ones
            sizer.reached = reached
    raise DependencyUnavailable(f"neo4j {what}: gave up after too many split chunks")
