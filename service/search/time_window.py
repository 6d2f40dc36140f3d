"""The time retriever: when the query names a time ("last week", "in May 2023") or a period around an event ("the
week before the concert"), the dense ranking within that window of `occurred_at`."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from service.core.domain import iso
from service.search.retriever import Query, Retrieved
from service.stores.vector import MemoryFilter, RankRequest, VectorStore
from service.text.timephrases import EventRelation, TimeWindow, event_window, find_event_relation, find_time_window


def narrow(flt: MemoryFilter, window: TimeWindow | None) -> MemoryFilter | None:
    """`flt` within the query's time window; None when there is no window or the two do not overlap."""
    if window is None:
        return None
    after = max(filter(None, [flt.after, iso(window.start)]), key=lambda t: datetime.fromisoformat(t))
    before = min(filter(None, [flt.before, iso(window.end)]), key=lambda t: datetime.fromisoformat(t))
    if datetime.fromisoformat(after) >= datetime.fromisoformat(before):
        return None
    return replace(flt, after=after, before=before)


class TimeWindows:
    name = "time"
    uses_vector = True
    remote_first = False

    def __init__(self, vectors: VectorStore, weight: float) -> None:
        self.vectors = vectors
        self.weight = weight

    async def retrieve(self, q: Query) -> Retrieved:
        # Parsing a time phrase is pure Python (dateparser): this retriever is last in the table, so the others'
        # store calls and the query's embedding have started before it holds the event loop.
        window = find_time_window(q.text)
        relation = find_event_relation(q.text) if window is None else None
        if relation is not None:
            window = await self._event_window(relation, q.flt)
        narrowed = narrow(q.flt, window)
        if narrowed is None:
            return Retrieved(window=window)
        [hits] = await self.vectors.rank([RankRequest(narrowed, q.limit, vector=await q.vector())])
        return Retrieved(hits, window=window)

    async def _event_window(self, relation: EventRelation, flt: MemoryFilter) -> TimeWindow | None:
        """The window of "the week before the concert": the event is dated by the memory whose words best match
        it (BM25 of the event's words among the caller's memories), then the period before or after its day."""
        [hits] = await self.vectors.rank([RankRequest(flt, 1, text=relation.event)])
        found = await self.vectors.get([hits[0][0]]) if hits else []
        if not found or not found[0].occurred_at:
            return None
        return event_window(relation, datetime.fromisoformat(found[0].occurred_at.replace("Z", "+00:00")))
