"""The API side of the structured graph writes: validate, resolve the ends given by id, build the memory that
states the entity, relation or fact (its links in `metadata.graph`) and queue it. Nothing here writes a store; the
worker side is writes.py."""

from __future__ import annotations

import json
import time
from typing import Any, Literal

from service.core.domain import Scope, iso, normalise
from service.core.errors import DomainError, NotFound, PayloadTooLarge
from service.core.sensitivity import Sensitivity
from service.core.settings import ServiceSettings
from service.graph_api.jobs import CommunityJob
from service.graph_api.vocabulary import entity_type, normalise_predicate
from service.identity.names import GENERIC, type_family
from service.ledger.links import KEY, entity_entry
from service.schemas.graph_api import End, EntityEnd, EntityWrite, FactWrite, RelationWrite
from service.schemas.memories import AcceptedResponse
from service.stores.facts import FactStore
from service.stores.graph import group_id, groups_for, scope_of_group
from service.tasks.jobs import GraphWriteJob
from service.tasks.queue import TaskQueue

Op = Literal["entity", "relation", "fact"]
CATEGORY = "domain_knowledge"  # the category of the memory a structured write is stored as
MAX_ATTRIBUTES_CHARS = 8_000


class GraphIntake:
    def __init__(self, service: ServiceSettings, tasks: TaskQueue, graph: FactStore) -> None:
        self.service = service
        self.tasks = tasks
        self.graph = graph  # the entities a relation names by id

    async def submit_communities(self, user_id: str) -> AcceptedResponse:
        """A rebuild of the user's communities now; every request is a new run (the identity carries its time)."""
        task_id = await self.tasks.enqueue(CommunityJob(user_id=user_id),
                                           {"user_id": user_id, "communities": time.time_ns()})
        return AcceptedResponse(task_id=task_id, poll_url=f"/v1/memories/status/{task_id}")

    async def _enqueue(self, job: GraphWriteJob, identity: dict[str, Any]) -> AcceptedResponse:
        task_id = await self.tasks.enqueue(job, identity)
        return AcceptedResponse(task_id=task_id, poll_url=f"/v1/memories/status/{task_id}")

    @staticmethod
    def _scope(scope: Scope | None, project_id: str | None) -> tuple[str, str | None]:
        if scope is Scope.PROJECT and not project_id:
            raise DomainError("scope 'project' needs a project_id")
        if scope is None:
            scope = Scope.PROJECT if project_id else Scope.GLOBAL
        return scope.value, project_id if scope is Scope.PROJECT else None

    def _job(self, op: Op, user_id: str, scope: str, project_id: str | None, agent_id: str | None, content: str,
             graph: dict[str, Any], valid_at: str | None, sensitivity: str | None = None) -> GraphWriteJob:
        if len(content) > self.service.max_content_chars:
            raise PayloadTooLarge(f"the statement has {len(content)} characters; the limit is "
                                  f"{self.service.max_content_chars} (MAX_CONTENT_CHARS)")
        metadata: dict[str, Any] = {KEY: graph}
        if valid_at is not None:
            metadata["valid_at"] = valid_at
        return GraphWriteJob(user_id=user_id, op=op, scope=scope, project_id=project_id, category=CATEGORY,
                             content=content, agent_id=agent_id, metadata=metadata, occurred_at=valid_at,
                             sensitivity=sensitivity)

    async def submit_entity(self, req: EntityWrite, user_id: str) -> AcceptedResponse:
        name = req.name.strip()
        if not name:
            raise DomainError("name is empty")
        etype = entity_type(req.type) or "thing"
        aliases = list(dict.fromkeys(a.strip() for a in req.aliases if a.strip() and a.strip() != name))
        attributes = json.dumps(req.attributes, sort_keys=True, ensure_ascii=False) if req.attributes else None
        if attributes is not None and len(attributes) > MAX_ATTRIBUTES_CHARS:
            raise PayloadTooLarge(f"attributes take {len(attributes)} characters as JSON; the limit is "
                                  f"{MAX_ATTRIBUTES_CHARS}")
        scope, project_id = self._scope(req.scope, req.project_id)
        content = f"{name} is {'an' if etype[:1] in 'aeiou' else 'a'} {etype}"
        if aliases:
            content += f" (also known as {', '.join(aliases)})"
        content += f": {req.description.strip()}" if req.description and req.description.strip() else "."
        entry = entity_entry(name, etype, aliases=aliases, description=req.description, attributes=attributes)
        job = self._job("entity", user_id, scope, project_id, req.agent_id, content, {"op": "entity",
                        "entities": [entry], "relations": []}, None, _tier(req.sensitivity))
        identity = {"user_id": user_id, "graph": "entity", "scope": scope, "project_id": project_id,
                    "name": normalise(name), "type": etype, "aliases": aliases, "description": req.description,
                    "attributes": attributes}
        if req.sensitivity is not None:  # only when given, so a write without it hashes as before
            identity["sensitivity"] = req.sensitivity.value
        return await self._enqueue(job, identity)

    async def submit_relation(self, req: RelationWrite | FactWrite, user_id: str) -> AcceptedResponse:
        op: Op = "relation" if isinstance(req, RelationWrite) else "fact"
        first, second = (req.source, req.target) if isinstance(req, RelationWrite) else (req.subject, req.object)
        predicate = normalise_predicate(req.predicate)
        if not predicate:
            raise DomainError("predicate has no letter or digit")
        scope, project_id = self._scope(req.scope, req.project_id)
        groups = groups_for(project_id)
        ends = [await self._end(user_id, groups, group_id(scope, project_id), e, what)
                for e, what in ((first, "source"), (second, "target"))]
        pinned = [e for e in ends if e.get("by_id")]
        if pinned and req.scope is None and req.project_id is None:  # by id: the write joins the entity's group
            scope, project_id = scope_of_group(str(pinned[0]["group_id"]))
        if len({e["name"].casefold() for e in ends}) < 2 and ends[0].get("id") == ends[1].get("id"):
            raise DomainError("a relation needs two different entities")
        group = group_id(scope, project_id)
        for e in pinned:
            if e["group_id"] != group:
                raise DomainError(f"entity '{e['id']}' belongs to another scope or project than this write")
        text = (req.fact or "").strip() or f"{ends[0]['name']} {req.predicate.strip()} {ends[1]['name']}"
        valid_at = iso(req.valid_at) if req.valid_at is not None else None
        relation: dict[str, Any] = {"subject": ends[0]["name"], "predicate": predicate, "object": ends[1]["name"],
                                    "fact": text, "valid_at": valid_at}
        if isinstance(req, RelationWrite) and req.confidence is not None:
            relation["confidence"] = req.confidence
        entries = [entity_entry(e["name"], e["type"], entity_id=e.get("id")) for e in ends]
        job = self._job(op, user_id, scope, project_id, req.agent_id, text,
                        {"op": op, "entities": entries, "relations": [relation]}, valid_at, _tier(req.sensitivity))
        identity = {"user_id": user_id, "graph": op, "scope": scope, "project_id": project_id,
                    "ends": [[e.get("id"), normalise(e["name"]), e["type"]] for e in ends], "predicate": predicate,
                    "fact": normalise(text), "valid_at": valid_at, "confidence": relation.get("confidence")}
        if req.sensitivity is not None:
            identity["sensitivity"] = req.sensitivity.value
        return await self._enqueue(job, identity)

    async def _end(self, user_id: str, groups: list[str], group: str, end: End, what: str) -> dict[str, Any]:
        """The live entity an id (404 if none) or a name the graph holds stands for, else the name (resolved by
        the gate in the write's transaction)."""
        if isinstance(end, str) or (isinstance(end, EntityEnd) and end.id is None):
            name = (end if isinstance(end, str) else end.name or "").strip()
            if not name:
                raise DomainError(f"{what} is empty")
            etype = entity_type(end.type) if isinstance(end, EntityEnd) else "thing"
            # a name the graph holds (its own, an alias, a merged entity's) is that entity, unless the write gives a
            # type of another family ("Acme" the person is not "Acme" the company): then the gate decides
            found = await self.graph.find_entity(user_id, groups, name=name)
            if found is None or found.get("group_id") != group or not (
                    type_family(etype) == GENERIC or type_family(etype) == type_family(str(found.get("type") or ""))):
                return {"name": name, "type": etype}
            by_id = False
        else:
            found = await self.graph.find_entity(user_id, groups, entity_id=end.id)
            if found is None:
                raise NotFound(f"{what}: unknown entity id '{end.id}'")
            by_id = True
        return {"id": str(found["id"]), "name": str(found["name"]), "type": str(found.get("type") or "thing"),
                "group_id": str(found.get("group_id") or "global"), "by_id": by_id}


def _tier(sensitivity: Sensitivity | None) -> str | None:
    return sensitivity.value if sensitivity is not None else None
