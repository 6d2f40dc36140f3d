"""The worker side of the structured graph writes: the memory that states an entity, a relation or a fact goes
through the memory write path (the ledger, the one graph write owner; the gate in the graph's transaction), and the
task result carries what the graph did with its entities."""

from __future__ import annotations

from typing import Any

from service.core.domain import MemoryOut
from service.memory.drafts import raw_memory
from service.tasks.jobs import GraphWriteJob
from service.writepath.writes import MemoryWriter


class GraphWrites:
    def __init__(self, writer: MemoryWriter) -> None:
        self.writer = writer

    async def store(self, task_id: str, job: GraphWriteJob) -> dict[str, Any]:
        """The result: the memory, `graph` stored/pending, every entity named with its decision (`entities`,
        `entity_count`, `relation_count`), and for an entity write its `resolution` (decision, entity id, matched
        id, score); for a relation or a fact, `source` and `target` (the same for each end)."""
        memory = raw_memory(task_id, 0, job.user_id, job, job.accepted_at)
        links = self.writer.links_of(memory)
        written = await self.writer.store.run(task_id, [memory], [links])
        result: dict[str, Any] = {"memories": [MemoryOut.of(memory).model_dump(mode="json")], **written}
        decisions = {str(e["name"]).casefold(): e for e in written["entities"]}

        def decision(name: str) -> dict[str, Any] | None:
            found = decisions.get(name.casefold())
            return None if found is None else {k: found[k] for k in ("decision", "entity_id", "matched_id", "score",
                                                                      "match_type")}

        if job.op == "entity":
            result["resolution"] = decision(links.entities[0].name) if links.entities else None
        elif links.relations:
            rel = links.relations[0]
            result.update(source=decision(rel.subject), target=decision(rel.object), predicate=rel.predicate)
        return result
