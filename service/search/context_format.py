"""Render a context (grouped memories) as a compact markdown block for an agent's prompt.

The block is lines joined by newlines: a title, a heading per category with its memories (most useful first), the
extra sections, and a last line saying how many memories were left out. Its parts are the functions below, which
the context builder (service/search/context.py) also uses to count the block's tokens before it is rendered: a
word-piece tokenizer splits on whitespace, so the block's tokens are the sum of its lines'.
"""

from __future__ import annotations

from service.schemas.memories import ContextResponse, MemoryRecord

EMPTY = "_No memories yet._"


def title(project_id: str | None) -> str:
    return f"# Memory context ({f'project {project_id}' if project_id else 'global'})"


def heading(category: str) -> str:
    return f"## {category.replace('_', ' ').capitalize()}"


def bullet(m: MemoryRecord) -> str:
    tag = f" [{m.project_id}]" if m.project_id else ""
    return f"- {' '.join(m.content.split())}{tag}"


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
        return (head + "\n" + EMPTY + "\n")[:max_chars]
    keep = {id(m) for _, _, m in entries}
    if max_chars is not None:
        used = len(head) + 1 + sum(len(line) + 1 for line in extra)
        seen: set[int] = set()
        keep = set()
        for i, (_, g, m) in enumerate(entries):
            cost = (len(heading(ctx.categories[g].category)) + 1 if g not in seen else 0) + len(bullet(m)) + 1
            remaining = len(entries) - i - 1 + ctx.omitted
            reserve = len(left_out(remaining, knob)) + 1 if remaining else 0
            if used + cost + reserve > max_chars:
                continue
            keep.add(id(m))
            seen.add(g)
            used += cost
    lines = [head]
    for group in ctx.categories:
        shown = [bullet(m) for m in group.memories if id(m) in keep]
        if shown:
            lines += [heading(group.category), *shown]
    lines += extra
    missing = ctx.omitted + len(entries) - len(keep)
    if missing:
        lines.append(left_out(missing, knob))
    text = "\n".join(lines) + "\n"
    return text[:max_chars]
