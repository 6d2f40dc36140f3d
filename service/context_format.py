"""Render a context (grouped memories) as a compact markdown block for an agent's prompt."""

from __future__ import annotations

from service.schemas import ContextResponse


def render_markdown(ctx: ContextResponse, max_chars: int) -> str:
    """Categories in their fixed order, one bullet per memory; never longer than `max_chars`.

    When the bound cuts memories off, the last line says how many were left out.
    """
    where = f"project {ctx.project_id}" if ctx.project_id else "global"
    lines = [f"# Memory context ({where})"]
    entries: list[tuple[str, str]] = []  # (heading, bullet)
    for group in ctx.categories:
        heading = f"## {group.category.replace('_', ' ').capitalize()}"
        for m in group.memories:
            tag = f" [{m.project_id}]" if m.project_id else ""
            entries.append((heading, f"- {' '.join(m.content.split())}{tag}"))
    if not entries:
        return (lines[0] + "\n_No memories yet._\n")[:max_chars]
    used = len(lines[0]) + 1
    current = None
    shown = 0
    for i, (heading, bullet) in enumerate(entries):
        extra = (len(heading) + 1 if heading != current else 0) + len(bullet) + 1
        remaining = len(entries) - i - 1
        reserve = len(f"_… {remaining} more not shown (raise max_chars)_\n") if remaining else 0
        if used + extra + reserve > max_chars:
            break
        if heading != current:
            lines.append(heading)
            current = heading
        lines.append(bullet)
        used += extra
        shown += 1
    if shown < len(entries):
        lines.append(f"_… {len(entries) - shown} more not shown (raise max_chars)_")
    text = "\n".join(lines) + "\n"
    return text[:max_chars]
