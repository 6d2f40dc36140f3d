"""What a graph write reports: the decision per entity it named, and the relations it wrote per memory."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class EntityDecision:
    """What the graph did with one entity a write named: `created`, `merged` (the gate folded it into
    `entity_id`, an entity it matched), `pending` (created, with a SAME_AS pair to review towards `matched_id`) or
    `existing` (the graph held it already under this name: no gate ran)."""

    name: str
    type: str
    entity_id: str
    decision: str
    matched_id: str | None = None
    score: float | None = None
    match_type: str | None = None


@dataclass
class GraphReport:
    """What one graph write did, per memory: the entities each named (with the decision) and the relations
    written for it."""

    entities: dict[str, list[EntityDecision]] = field(default_factory=dict)  # memory id -> its entities
    relations: dict[str, int] = field(default_factory=dict)  # memory id -> relations written for it

    def of(self, memory_ids: Sequence[str]) -> GraphReport:
        ids = set(memory_ids)
        return GraphReport({k: v for k, v in self.entities.items() if k in ids},
                           {k: v for k, v in self.relations.items() if k in ids})

    def add(self, other: GraphReport) -> None:
        for k, v in other.entities.items():
            self.entities.setdefault(k, []).extend(v)
        for k, n in other.relations.items():
            self.relations[k] = self.relations.get(k, 0) + n

    def summary(self) -> dict[str, Any]:
        """The task result's part: each entity once (by the entity it ended as), counts."""
        seen: dict[tuple[str, str], dict[str, Any]] = {}
        for decisions in self.entities.values():
            for d in decisions:
                seen.setdefault((d.name.casefold(), d.entity_id), {k: v for k, v in d.__dict__.items()})
        entities = sorted(seen.values(), key=lambda d: (str(d["name"]).casefold(), str(d["entity_id"])))
        return {"entities": entities, "entity_count": len({d["entity_id"] for d in entities}),
                "relation_count": sum(self.relations.values())}
