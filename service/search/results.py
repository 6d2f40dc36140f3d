"""Result assembly: the fused ids with their memories, as the API answers them, collapsed by source."""

from __future__ import annotations

from typing import Literal

from service.core.domain import Memory
from service.schemas.search import Folded, SearchResult, Signal
from service.search.context_format import days
from service.search.fusion import Fused
from service.stores.vector import VectorStore

INTERACTION = "interaction"
# Vector-store retrievers: a result any of them returned says `source: "vector"`; one only the graph found, "graph".
GRAPH_ONLY = frozenset({"graph"})
READS = 5  # bounded: a read is `limit` payloads; deletes racing a search and folded results ask for more


def kind_of(m: Memory) -> Literal["fact", "window", "memory"]:
    """What a memory is: an interaction window of a conversation's messages, a fact extracted from messages, or a
    memory written as it is."""
    if not m.source_message_ids:
        return "memory"
    return "window" if m.category == INTERACTION else "fact"


def sources_of(m: Memory) -> frozenset[str]:
    """A memory's source messages, qualified by the write they came in: message ids may be indexes ("0", "1"),
    which two conversations share; a fact and the window it came from are always of one write."""
    return frozenset(f"{m.task_id or ''}\x1f{s}" for s in m.source_message_ids)


def memory_result(m: Memory, score: float, signals: dict[str, tuple[int, float]]) -> SearchResult:
    """A fused search hit: the memory, its fused score and each retriever's rank and own score."""
    return SearchResult(
        id=m.id, content=m.content, score=round(score, 6),
        source="graph" if signals and set(signals) <= GRAPH_ONLY else "vector",
        category=m.category, scope=m.scope,
        project_id=m.project_id, created_at=m.created_at, agent_id=m.agent_id, metadata=m.metadata,
        occurred_at=m.occurred_at or m.created_at, source_message_ids=m.source_message_ids,
        superseded_by=m.superseded_by, event_at=days(m.occurred_at, m.created_at, m.metadata)[1],
        signals=[Signal(retriever=name, rank=rank, score=round(own, 6))  # type: ignore[arg-type]
                 for name, (rank, own) in sorted(signals.items(), key=lambda kv: kv[1][0])],
    )


class Collapse:
    """The results so far, each memory whose source messages another result covers folded into it.

    A memory joins a kept result when its `source_message_ids` are among the kept one's (a fact and the window it
    came from, a part and its fold; message ids count within the write they came in). When a kept result's
    sources are among the new memory's instead (a fact ranked above its own window), the covering memory takes
    the kept one's slot and score, and the kept one goes into its `also`: what it says is said in the covering
    memory's content, so the slot carries both. Memories without sources (raw writes) never fold."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.out: list[SearchResult] = []
        self.kinds: dict[str, Literal["fact", "window", "memory"]] = {}
        self.sources: list[frozenset[str]] = []

    def add(self, m: Memory, fused: Fused) -> None:
        result = memory_result(m, fused.score, fused.signals)
        self.kinds[m.id] = kind_of(m)
        mine = sources_of(m)
        if not self.enabled or not mine:
            self.out.append(result)
            self.sources.append(mine)
            return
        for i, theirs in enumerate(self.sources):
            if not theirs:
                continue
            if mine <= theirs:  # covered by a better-ranked result
                self.out[i].also.append(Folded(id=m.id, kind=self.kinds[m.id]))
                return
            if theirs < mine:  # covers a better-ranked result: takes its slot
                kept = self.out[i]
                result.score = kept.score
                result.also = [Folded(id=kept.id, kind=self.kinds[kept.id]), *kept.also]
                self.out[i] = result
                self.sources[i] = mine
                self._absorb(i)
                return
        self.out.append(result)
        self.sources.append(mine)

    def _absorb(self, at: int) -> None:
        """The result now at `at` may also cover results ranked below it: they fold into it too."""
        mine = self.sources[at]
        for j in range(len(self.out) - 1, at, -1):
            if self.sources[j] and self.sources[j] <= mine:
                folded = self.out.pop(j)
                del self.sources[j]
                self.out[at].also += [Folded(id=folded.id, kind=self.kinds[folded.id]), *folded.also]


async def results(vectors: VectorStore, fused: list[Fused], limit: int, collapse: bool = True) -> list[SearchResult]:
    """The first `limit` fused hits with their memories, collapsed by source unless `collapse` is false: the
    retrievers rank ids only, so only these payloads are read (and the next ones when some folded). A memory
    deleted since it was ranked is skipped and the next one taken."""
    kept = Collapse(collapse)
    start = 0
    for _ in range(READS):
        want = fused[start : start + limit - len(kept.out)]
        if not want:
            break
        found = {m.id: m for m in await vectors.get([f.id for f in want])}
        for f in want:
            if f.id in found and len(kept.out) < limit:
                kept.add(found[f.id], f)
        start += len(want)
        if len(kept.out) >= limit:
            break
    return kept.out
