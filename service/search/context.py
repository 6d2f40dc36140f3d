"""The session context (GET /v1/context/..., the MCP context tool, the session-start hook): the user's memories
ranked for the session, restatements left out, fitted to a token budget (docs/retrieval.md "Context").

Order, most useful first:
1. the hits of the session's query, when one is given (a search's results, each with the memories folded into
   it, in its order);
2. facts and memories written as they are before interaction windows;
3. with a project: the project's memories before global ones;
4. then by usefulness: recency (half-life CONTEXT_RECENCY_DAYS of `occurred_at`) and how often search returned
   the memory (service/search/usage.py), each half of the weight.

Left out as restatements: a window a listed fact came from (the fact says it; its sources are the window's
messages), and a memory whose text (whitespace and case aside) a better-ranked one already says. The user's own words
win over a weaker rendering of them (`keeps_words`): when a fact of a window is a fragment that names nothing ("I
really prefer it that way."), or the window's facts hold less than a third of the words its user said, the window is
listed in the place of its first fact, and the fragments are left out instead.

The budget: the markdown block (service/search/context_format.py) is counted with the embedder's tokenizer
(service/ai/tokens.py); memories are taken in order while they fit, a longer one skipped for shorter ones after it.
Extra sections (`ContextSection`, e.g. lessons of earlier sessions) come from the caller, in their own function,
and take their lines first, up to SECTION_SHARE of the budget; the memories have the rest.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from service.ai.tokens import TokenCounter
from service.core.domain import CATEGORIES, Memory
from service.schemas.memories import ContextGroup, ContextResponse, ContextSection, MemoryRecord
from service.search import context_format as fmt
from service.search.results import INTERACTION, sources_of

SECTION_SHARE = 0.5  # at most this part of max_tokens goes to the extra sections
RECENCY_DAYS = 30.0  # recency's half-life


@dataclass(frozen=True)
class Ranked:
    memories: list[Memory]  # most useful first
    restated: int  # left out: a listed memory says it


def _plain(text: str) -> str:
    return " ".join(text.split()).casefold()


def _when(m: Memory) -> datetime:
    raw = m.occurred_at or m.created_at
    try:
        at = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def rank(memories: Sequence[Memory], project_id: str | None, hits: Sequence[str], counts: dict[str, int],
         now: datetime, recency_days: float = RECENCY_DAYS) -> Ranked:
    """The memories most useful first, restatements left out (the module's docstring has the order)."""
    hit_rank = {mid: i for i, mid in enumerate(hits)}
    top = max((counts.get(m.id, 0) for m in memories), default=0)

    def useful(m: Memory) -> float:
        age_days = max(0.0, (now - _when(m)).total_seconds() / 86400)
        recency: float = 0.5 ** (age_days / recency_days)
        frequency = math.log1p(counts.get(m.id, 0)) / math.log1p(top) if top else 0.0
        return 0.5 * recency + 0.5 * frequency

    def key(m: Memory) -> tuple[int, int, int, int, float, str]:
        return (0 if m.id in hit_rank else 1, hit_rank.get(m.id, 0), 1 if m.category == INTERACTION else 0,
                0 if project_id is not None and m.project_id == project_id else 1, -useful(m), m.id)

    ordered = sorted(memories, key=key)
    facts = [m for m in ordered if m.category != INTERACTION]
    facts_from: set[str] = set()
    for m in facts:
        facts_from |= sources_of(m)
    dropped: set[str] = set()  # fragments whose window is listed instead
    before: dict[str, list[Memory]] = {}  # a fact's id -> the windows listed in its place
    moved: set[str] = set()
    keep: set[str] = set()  # windows that keep their words beside their facts
    for w in ordered:
        if w.category != INTERACTION or not (sources_of(w) & facts_from):
            continue
        own = [f for f in facts if sources_of(f) & sources_of(w)]
        fragments = keeps_words(w, own)
        if fragments is None:
            continue  # its facts say it: a restatement, left out below
        dropped.update(f.id for f in fragments)
        keep.add(w.id)
        if w.id not in hit_rank:
            before.setdefault(own[0].id, []).append(w)
            moved.add(w.id)
    out: list[Memory] = []
    said: set[str] = set()
    restated = 0

    def take(m: Memory) -> None:
        nonlocal restated
        text = _plain(m.content)
        if text in said:
            restated += 1
            return
        said.add(text)
        out.append(m)

    for m in ordered:
        for w in before.get(m.id, ()):
            take(w)
        if m.id in dropped or (m.category == INTERACTION and sources_of(m) & facts_from and m.id not in keep):
            restated += 1
            continue
        if m.id in moved:
            continue  # listed in its fact's place
        take(m)
    return Ranked(out, restated)


# Words that name nothing (function words, stance words: "I really prefer it that way" names nothing it is about).
_EMPTY = frozenset(re.findall(r"\S+", """
a an the and or but so to of for with in on at by as from into about than then that this these those it its
it's they them their there here he she him her his we our us you your i i'm i've i'd i'll me my mine is are was
were be been am do does did don't not no very really just also too quite much more most always never usually
still even though anyway way like likes liked love loves prefer prefers preferred enjoy hate want wants need
think feel find keep good great fine nice better best bad ok okay how what one thing things stuff lot user
assistant system tool hi hey hello thanks thank please sure yes yeah
"""))
_WORD = re.compile(r"[a-z0-9][a-z0-9'+#-]*")
COVERAGE = 1 / 3  # facts saying less than this share of the words the user said in a window are a weaker rendering


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.casefold()) if len(w) > 2 and w not in _EMPTY}


def _user_words(window: Memory) -> set[str]:
    lines = [line.removeprefix("user:") for line in window.content.splitlines() if line.startswith("user:")]
    return _words(" ".join(lines) if lines else window.content)


def keeps_words(window: Memory, facts: Sequence[Memory]) -> list[Memory] | None:
    """Whether a window keeps its own place beside the facts that came from it: None when the facts say what its
    user said (the window is a restatement); else the facts that are fragments of it (they name nothing of their
    own: "I really prefer it that way."), which the window's words replace. A window is kept when a fact
    of it is such a fragment, or when its facts together hold less than COVERAGE of the words its user said."""
    fragments = [f for f in facts if not _words(f.content)]
    said = _user_words(window)
    told = set().union(*(_words(f.content) for f in facts)) if facts else set()
    if fragments or (said and len(told & said) < COVERAGE * len(said)):
        return fragments
    return None


def _groups(records: list[MemoryRecord]) -> list[ContextGroup]:
    by: dict[str, list[MemoryRecord]] = {}
    for r in records:
        by.setdefault(r.category, []).append(r)
    return [ContextGroup(category=name, group=CATEGORIES[name].group, memories=by[name])
            for name in CATEGORIES if name in by]


def _fit_sections(sections: list[ContextSection], budget: int, counter: TokenCounter) -> tuple[
        list[ContextSection], int]:
    """The sections' lines in order while they fit `budget`; their tokens."""
    out: list[ContextSection] = []
    used = 0
    for s in sections:
        head = counter.count(fmt.heading(s.title))
        lines: list[str] = []
        for line in s.lines:
            cost = counter.count(line) + (head if not lines else 0)
            if used + cost > budget:
                break
            lines.append(line)
            used += cost
        if lines:
            out.append(ContextSection(title=s.title, lines=lines))
    return out, used


HISTORY_KEPT = 3  # the most past values a memory's line carries


def histories(memories: Sequence[Memory]) -> dict[str, list[Memory]]:
    """For each memory not superseded that replaced others (`superseded_by`, directly or through a chain): those
    values, oldest first, the newest HISTORY_KEPT. The reader (often an LLM) can then judge which is current."""
    replaced: dict[str, list[Memory]] = {}
    for m in memories:
        if m.superseded_by:
            replaced.setdefault(m.superseded_by, []).append(m)
    out: dict[str, list[Memory]] = {}
    for m in memories:
        if m.superseded_by or m.id not in replaced:
            continue
        past: list[Memory] = []
        frontier, seen = list(replaced[m.id]), {m.id}
        while frontier and len(seen) < 100:  # bounded: a chain of corrections, never a cycle
            p = frontier.pop()
            if p.id in seen:
                continue
            seen.add(p.id)
            past.append(p)
            frontier += replaced.get(p.id, [])
        out[m.id] = sorted(past, key=_when)[-HISTORY_KEPT:]
    return out


def build(user_id: str, project_id: str | None, ranked: Ranked, *, per_category: int, total: int,
          max_tokens: int | None = None, counter: TokenCounter | None = None,
          sections: Sequence[ContextSection] = (), past: dict[str, list[Memory]] | None = None) -> ContextResponse:
    """The context: the ranked memories (at most `per_category` of a category), with `max_tokens` those whose
    markdown block fits it, counted by `counter`; `past`: the values each memory replaced (`histories`)."""
    history = {mid: [MemoryRecord.of(p) for p in values] for mid, values in (past or {}).items()}
    taken: dict[str, int] = {}
    records: list[MemoryRecord] = []
    capped = 0
    for m in ranked.memories:
        if taken.get(m.category, 0) >= per_category:
            capped += 1
            continue
        taken[m.category] = taken.get(m.category, 0) + 1
        records.append(MemoryRecord.of(m))
    extra = list(sections)
    if max_tokens is None or counter is None:
        return ContextResponse(user_id=user_id, project_id=project_id, categories=_groups(records), total=total,
                               order=[r.id for r in records], restated=ranked.restated, omitted=capped,
                               sections=[s for s in extra if s.lines], history=_shown(history, records))
    extra, used = _fit_sections(extra, int(max_tokens * SECTION_SHARE), counter)
    used += counter.count(fmt.title(project_id))
    own = [counter.count(fmt.bullet(r, history.get(r.id, ()))) for r in records]
    head = {c: counter.count(fmt.heading(c)) for c in {r.category for r in records}}
    if capped == 0 and used + sum(own) + sum(head.values()) <= max_tokens:
        kept = records
    else:  # the last line will say how many were left out: its tokens are kept free (+1: fewer digits may
        # split differently)
        used += counter.count(fmt.left_out(len(records) + capped, "max_tokens")) + 1
        headings: set[str] = set()
        kept = []
        for r, tokens in zip(records, own, strict=True):
            cost = tokens + (0 if r.category in headings else head[r.category])
            if used + cost <= max_tokens:
                kept.append(r)
                headings.add(r.category)
                used += cost
    ctx = ContextResponse(user_id=user_id, project_id=project_id, categories=_groups(kept), total=total,
                          order=[r.id for r in kept], restated=ranked.restated,
                          omitted=capped + len(records) - len(kept), max_tokens=max_tokens, tokenizer=counter.name,
                          sections=extra, history=_shown(history, kept))
    ctx.tokens = counter.count(fmt.render_markdown(ctx))
    return ctx


def _shown(history: dict[str, list[MemoryRecord]], records: Sequence[MemoryRecord]) -> dict[str, list[MemoryRecord]]:
    return {r.id: history[r.id] for r in records if r.id in history}
