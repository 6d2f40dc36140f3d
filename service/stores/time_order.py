"""Listings by created_at (ListOrder.NEWEST, OLDEST), written once over both Qdrant adapters' two reads.

What the engines give (qdrant-edge-py 0.9.0 and qdrant-client 1.20, server and local mode alike): a scroll
`order_by` a payload field, which Edge and a server answer only with a range index on it (a datetime index on
`created_at`: CREATED_FIELD), and which takes no offset (a page cannot go on from a point) and returns equal values
in no set order. So a page is made of two reads:

- `ordered`: the memories beyond the cursor's time (a range condition on created_at, strict), by created_at, each
  with its order value (microseconds since the epoch, the index's precision);
- `by_id`: the memories of one created_at value in id order from an offset (the engine's own id scroll).

The total order is (created_at newest or oldest first, then id). The ordered read asks for one memory more than the
page needs: the values before the page's last one are complete groups (sorted here by id); the last value's group
may go on past the page, so it is read again by id, and the cursor names the value and the first id not yet listed
(`<n|o><microseconds>.<id>`), or only the value when its group is done. Ties therefore never skip or repeat a memory,
however many share a created_at.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import TypeVar, cast

from service.core.domain import ORDER_MARKS, ListOrder, Memory
from service.core.errors import DomainError
from service.stores.qdrant_common import FilterBuilder, parse_cursor
from service.stores.vector import CREATED_FIELD, MemoryFilter

C = TypeVar("C")
F = TypeVar("F")

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# (filter, newest first, limit) -> memories by created_at with their order values (microseconds)
Ordered = Callable[[F, bool, int], Awaitable[list[tuple[Memory, int]]]]
# (filter, first id or None, limit) -> memories in id order, the next page's first id
ById = Callable[[F, str | None, int], Awaitable[tuple[list[Memory], str | None]]]


def moment(micros: int) -> str:
    """An order value as the ISO form a datetime range condition takes."""
    return (EPOCH + timedelta(microseconds=micros)).isoformat()


def encode(order: ListOrder, at: int, next_id: str | None) -> str:
    return f"{ORDER_MARKS[order]}{at}" + (f".{next_id}" if next_id is not None else "")


def decode(order: ListOrder, cursor: str) -> tuple[int, str | None]:
    """(created_at in microseconds, the first id of that value's group not yet listed, or None)."""
    mark = ORDER_MARKS[order]
    at, _, next_id = cursor[len(mark):].partition(".") if cursor.startswith(mark) else ("", "", "")
    try:
        return int(at), (parse_cursor(next_id) if next_id else None)
    except (ValueError, DomainError) as e:
        raise DomainError(f"invalid cursor '{cursor}' for order '{order.value}'") from e


async def page_by_time(filters: FilterBuilder[C, F], ordered: Ordered[F], by_id: ById[F], flt: MemoryFilter,
                       limit: int, cursor: str | None, order: ListOrder) -> tuple[list[Memory], str | None]:
    """One page of `flt`'s memories in `order` (NEWEST or OLDEST); returns (page, next_cursor)."""
    newest = order is ListOrder.NEWEST
    at, next_id = decode(order, cursor) if cursor is not None else (None, None)
    base = filters.build(flt)
    if base is None or limit <= 0:
        return [], None

    def within(gte: int | None, lt: int | None) -> F:
        span = filters.time_range(CREATED_FIELD, None if gte is None else moment(gte), None if lt is None else
                                  moment(lt))
        return filters.all_of([cast(C, base), span])

    def group(value: int) -> F:  # the memories created at exactly `value` (microseconds)
        return within(value, value + 1)

    out: list[Memory] = []
    if at is not None and next_id is not None:  # the rest of a group the last page ended in
        out, nxt = await by_id(group(at), next_id, limit)
        if nxt is not None:
            return out, encode(order, at, nxt)
    need = limit - len(out)
    beyond = base if at is None else (within(None, at) if newest else within(at + 1, None))
    rows = await ordered(beyond, newest, need + 1)

    def by_time(rows: list[tuple[Memory, int]]) -> list[Memory]:
        rows = sorted(rows, key=lambda r: (-r[1] if newest else r[1], uuid.UUID(r[0].id)))
        return [m for m, _ in rows]

    if len(rows) <= need:  # the end: every group is whole
        return out + by_time(rows), None
    if need == 0:  # the cursor's group filled the page, and more follow it
        return out, None if at is None else encode(order, at, None)
    last = rows[need - 1][1]
    out += by_time([r for r in rows[:need] if r[1] != last])  # groups before the page's last value are whole
    rest, nxt = await by_id(group(last), None, limit - len(out))
    return out + rest, encode(order, last, nxt)
