"""What a retriever is and what it gets: the `Retriever` Protocol, the search it serves (`Query`) and what it
answers (`Retrieved`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from service.stores.vector import MemoryFilter
from service.text.timephrases import TimeWindow

Ranked = list[tuple[str, float]]  # a retriever's (memory id, its own score), best first


@dataclass(frozen=True)
class Query:
    """One search as every retriever sees it: the same filter and list length for all of them, and the query's
    embedding computed once for those that use it."""

    text: str
    user_id: str
    project_id: str | None
    flt: MemoryFilter
    limit: int  # each retriever's list length
    embed: Callable[[str], Awaitable[list[float]]]  # another text's embedding (cached per process)
    embedding: asyncio.Future[list[float]] | None  # started beside the retrievers when one of them uses it

    async def vector(self) -> list[float]:
        """The query's embedding (only a retriever with `uses_vector` may ask)."""
        if self.embedding is None:
            raise RuntimeError("the query was not embedded: the retriever must set uses_vector")
        return await self.embedding


@dataclass(frozen=True)
class Retrieved:
    hits: Ranked = field(default_factory=list)
    degraded: bool = False  # its store was down or too slow: the answer says so instead of failing
    window: TimeWindow | None = None  # the time the query names, as the retriever searched it


class Retriever(Protocol):
    name: str  # its name in `signals` and in the request's `retrievers`
    weight: float  # its weight in the fusion (a SEARCH_WEIGHT_* setting)
    uses_vector: bool  # it reads the query's embedding, which then starts at once
    # Its first step is a query to another process (the graph database): it starts before the others, so that
    # process works while their store calls (in this process, holding the GIL) run (searcher.py).
    remote_first: bool

    async def retrieve(self, q: Query) -> Retrieved:
        """Up to `q.limit` memory ids the filter admits, best first, with the retriever's own scores."""
