"""Entity communities: each user's entities grouped by their current relations (Louvain modularity, networkx, a
fixed seed so a run over the same graph gives the same groups), each group with a summary. Run by a daily cron and
on request (job kind `communities`); read by `GET /v1/graph/communities` (docs/graph.md).

The offline summary: the group's best-connected entities and its most frequent predicates ("Alice Smith, Acme,
Globex: works_at, lives_in"); with GOOGLE_API_KEY, Gemini writes it from the members and the facts inside the group
(service/ai/gemini/summaries.py), and a failed call keeps the offline one. Members are ranked by their relations
inside the group, then by all their relations."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any, Protocol

import networkx as nx
import structlog

from service.core.domain import ID_NAMESPACE, now_iso
from service.core.errors import DependencyUnavailable, ServiceError
from service.graph_api.jobs import CommunityJob
from service.stores.facts import CommunityStore
from service.stores.graph import MemoryUsers

log = structlog.get_logger(__name__)

SEED = 29
MAX_RELATIONS = 200_000  # relations read per user and run
TOP_ENTITIES = 5
TOP_PREDICATES = 3
MAX_LLM_SUMMARIES = 50  # LLM summaries per user and run (the biggest communities)


def detect(user_id: str, relations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Communities of two or more entities from rows {source, target, predicate, s, o}: {id, size, members
    [{id, rank}], predicates, summary, summary_source}, biggest first. The id derives from the user and the
    group's best-ranked member, so a group that keeps its centre keeps its id."""
    graph = nx.Graph()
    names: dict[str, str] = {}
    types: dict[str, str] = {}
    for r in relations:
        a, b = str(r["source"]), str(r["target"])
        names[a], names[b] = str(r["s"].get("name") or a), str(r["o"].get("name") or b)
        types[a], types[b] = str(r["s"].get("type") or "thing"), str(r["o"].get("type") or "thing")
        weight = graph.get_edge_data(a, b, {"weight": 0})["weight"]
        graph.add_edge(a, b, weight=weight + 1)
    if graph.number_of_edges() == 0:
        return []
    parts = nx.community.louvain_communities(graph, weight="weight", seed=SEED)
    out: list[dict[str, Any]] = []
    for part in parts:
        if len(part) < 2:
            continue
        inside = graph.subgraph(part)
        ranked = sorted(part, key=lambda n: (-inside.degree(n, weight="weight"), -graph.degree(n, weight="weight"),
                                             names[n].casefold(), n))
        predicates = Counter(str(r["predicate"]) for r in relations
                             if str(r["source"]) in part and str(r["target"]) in part)
        top = [p for p, _ in sorted(predicates.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_PREDICATES]]
        summary = ", ".join(names[n] for n in ranked[:TOP_ENTITIES])
        if len(ranked) > TOP_ENTITIES:
            summary += f" and {len(ranked) - TOP_ENTITIES} more"
        if top:
            summary += ": " + ", ".join(top)
        facts = [str(r.get("fact") or "") for r in relations if str(r["source"]) in part and str(r["target"]) in part]
        out.append({"id": str(uuid.uuid5(ID_NAMESPACE, f"community|{user_id}|{ranked[0]}")), "size": len(part),
                    "members": [{"id": n, "rank": i} for i, n in enumerate(ranked)], "predicates": top,
                    "summary": summary, "summary_source": "offline",
                    "names": [(names[n], types.get(n, "thing")) for n in ranked], "facts": [f for f in facts if f]})
    out.sort(key=lambda c: (-int(c["size"]), str(c["id"])))
    return out


class CommunitySummarizer(Protocol):
    name: str

    async def summarise(self, members: list[tuple[str, str]], facts: list[str]) -> str: ...


class Communities:
    def __init__(self, graph: CommunityStore, users: MemoryUsers, summarizer: CommunitySummarizer | None = None
                 ) -> None:
        self.graph = graph
        self.users = users  # every user's communities: the users the graph holds memories of
        self.summarizer = summarizer  # Gemini when GOOGLE_API_KEY is set; else the offline summary only

    async def rebuild(self, user_id: str) -> dict[str, int]:
        relations = await self.graph.live_relations(user_id, MAX_RELATIONS)
        found = detect(user_id, relations)
        summarised = await self._summarise(user_id, found)
        await self.graph.replace_communities(user_id, found, now_iso())
        log.info("communities_rebuilt", user_id=user_id, communities=len(found), relations=len(relations),
                 summarised=summarised)
        return {"communities": len(found), "entities": sum(int(c["size"]) for c in found),
                "relations": len(relations), "summarised": summarised}

    async def _summarise(self, user_id: str, found: list[dict[str, Any]]) -> int:
        """LLM summaries of the biggest communities (at most MAX_LLM_SUMMARIES a run); one that fails keeps its
        offline summary."""
        if self.summarizer is None:
            return 0
        done = 0
        for community in found[:MAX_LLM_SUMMARIES]:
            try:
                text = await self.summarizer.summarise(community["names"], community["facts"])
            except ServiceError as exc:
                log.warning("community_summary_failed", user_id=user_id, community=community["id"],
                            error=str(exc)[:300])
                continue
            community.update(summary=text, summary_source=self.summarizer.name)
            done += 1
        return done

    async def run(self, task_id: str, job: CommunityJob) -> dict[str, Any]:
        """The job: one user's communities, or every user's (one failing user does not stop the others)."""
        users = [job.user_id] if job.user_id else await self.users.memory_users()
        done: dict[str, dict[str, int]] = {}
        failed: list[str] = []
        for user in users:
            if not user:
                continue
            try:
                done[user] = await self.rebuild(user)
            except DependencyUnavailable:
                if job.user_id:
                    raise
                failed.append(user)
        return {"users": len(done), "communities": sum(d["communities"] for d in done.values()),
                "failed_users": failed, **({"report": done[job.user_id]} if job.user_id in done else {})}
