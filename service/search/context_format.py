"""Render a context (grouped memories) as a compact markdown block for an agent's prompt.

The block is lines joined by newlines: a title, a heading per category with its memories (most useful first), the
extra sections, and a last line saying how many memories were left out. Its parts are the functions below, which
the context builder (service/search/context.py) also uses to count the block's tokens before it is rendered: a
word-piece tokenizer splits on whitespace, so the block's tokens are the sum of its lines'.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from service.schemas.memories import ContextResponse, MemoryRecord

EMPTY = "_No memories yet._"
NOTHING_RELATED = "_Nothing stored is related to this._"  # a context with a query that found nothing above the floor


def title(project_id: str | None) -> str:
    return f"# Memory context ({f'project {project_id}' if project_id else 'global'})"


def heading(category: str) -> str:
    return f"## {category.replace('_', ' ').capitalize()}"


def day(stamp: str | None) -> str | None:
    """An ISO 8601 time as the day a person reads (2026-11-30); None when there is none."""
    return stamp[:10] if stamp and len(stamp) >= 10 and stamp[4] == "-" else None


def days(occurred_at: str | None, created_at: str | None, metadata: dict[str, Any] | None
         ) -> tuple[str | None, str | None]:
    """(the day it was said, the day of the event it is about when that is another day). A message that names a time
    keeps both in its metadata (`said_at`, `event_at`: "we moved last weekend" said on 5 December happened on 29
    November; a plan made on 4 December for next Friday is for 11 December); else it was said when it occurred (a
    message's timestamp), or when it was stored. The one date rule of context, MCP recall and the current-first pass."""
    meta = metadata or {}
    said = day(str(meta.get("said_at") or "")) or day(occurred_at) or day(created_at)
    event = day(str(meta.get("event_at") or ""))
    return said, event if event != said else None


def dated(m: MemoryRecord) -> str:
    """"said 2026-11-30"; with an event on another day, "said 2026-12-04, for 2026-12-11" (a plan) or "said
    2026-12-05, happened 2026-11-29" (a report)."""
    said, event = days(m.occurred_at, m.created_at, m.metadata)
    if event is None:
        return f"said {said or '?'}"
    return f"said {said or '?'}, {'for' if said is None or event > said else 'happened'} {event}"


def bullet(m: MemoryRecord, past: Sequence[MemoryRecord] = ()) -> str:
    """One memory's line, dated; with `past` (the values it replaced, oldest first) the slot's history, the current
    value marked: "- I live in Lisbon. (said 2026-11-30) → We moved to Porto. (said 2026-12-05, current)"."""
    tag = f" [{m.project_id}]" if m.project_id else ""
    before = "".join(f"{' '.join(p.content.split())} ({dated(p)}) → " for p in past)
    return f"- {before}{' '.join(m.content.split())}{tag} ({dated(m)}{', current' if past else ''})"


def left_out(n: int, knob: str) -> str:
    return f"_… {n} more not shown (raise {knob})_"


def render_markdown(ctx: ContextResponse, max_chars: int | None = None) -> str:
    """Categories in their fixed order, one bullet per memory, then the extra sections; never longer than
    `max_chars` (when given: the memories are then taken most useful first, `ctx.order`, while they fit).

    When memories are left out (by the builder's `max_tokens`, or here by `max_chars`), the last line says how
    many."""
    head = title(ctx.project_id)
    knob = "max_tokens" if ctx.max_tokens is not None else "max_chars"
    rank = {mid: i for i, mid in enumerate(ctx.order)}
    entries = sorted(((rank.get(m.id, len(rank)), g, m) for g, group in enumerate(ctx.categories)
                      for m in group.memories), key=lambda e: e[0])
    extra = [line for s in ctx.sections for line in (heading(s.title), *s.lines) if s.lines]
    if not entries and not extra:
        return (head + "\n" + (NOTHING_RELATED if ctx.unrelated else EMPTY) + "\n")[:max_chars]
    keep = {id(m) for _, _, m in entries}
    if max_chars is not None:
        used = len(head) + 1 + sum(len(line) + 1 for line in extra)
        seen: set[int] = set()
        keep = set()
        for i, (_, g, m) in enumerate(entries):
            cost = ((len(heading(ctx.categories[g].category)) + 1 if g not in seen else 0)
                    + len(bullet(m, ctx.history.get(m.id, ()))) + 1)
            remaining = len(entries) - i - 1 + ctx.omitted
            # the last line counts every memory left out, the ones skipped before this one too: its widest form
            reserve = len(left_out(len(entries) + ctx.omitted, knob)) + 1 if remaining or len(keep) < i else 0
            if used + cost + reserve > max_chars:
                continue
            keep.add(id(m))
            seen.add(g)
            used += cost
    lines = [head]
    for group in ctx.categories:
        shown = [bullet(m, ctx.history.get(m.id, ())) for m in group.memories if id(m) in keep]
        if shown:
            lines += [heading(group.category), *shown]
    lines += extra
    missing = ctx.omitted + len(entries) - len(keep)
    if missing:
        lines.append(left_out(missing, knob))
    text = "\n".join(lines) + "\n"
    return text[:max_chars]
