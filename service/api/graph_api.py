"""The graph as an API (docs/graph.md): structured writes (202 + task id, Idempotency-Key), facts about an entity,
structural queries."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from service import routes
from service.api.declared import on
from service.api.deps import GraphFactsDep, GraphIntakeDep, IntakeDep
from service.api.errors import responses
from service.api.idempotency import IdempotencyKey, fingerprint, once
from service.api.params import PAGE, Cursor, EntityId, GraphProjectQuery, OptionalUserQuery, PageLimit
from service.api.security import CallerDep
from service.core.sensitivity import lowered
from service.schemas.graph_api import (
    CommunityPage,
    CommunityRebuild,
    EntityFactsPage,
    EntityWrite,
    FactPage,
    FactWrite,
    GraphQuery,
    RelationWrite,
)
from service.schemas.memories import AcceptedResponse

router = APIRouter(prefix="/v1/graph", tags=["graph"])


NameQuery = Annotated[str | None, Query(min_length=1, max_length=200)]
EntityIdQuery = Annotated[str | None, Query(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9-]+$")]


@on(router, routes.ADD_ENTITY)
async def write_entity(req: EntityWrite, graph: GraphIntakeDep, intake: IntakeDep, caller: CallerDep,
                       idempotency_key: IdempotencyKey = None) -> AcceptedResponse:
    """An entity through the resolution gate. 202; the task's result has `resolution` (merged | pending | created
    | existing, the entity id, the matched id, the score)."""
    user = caller.user(req.user_id)
    fp = fingerprint("POST", "/v1/graph/entities", req.model_dump(mode="json"))
    return await once(intake, caller, user, idempotency_key, fp, lambda: graph.submit_entity(req, user))


@on(router, routes.ADD_RELATION)
async def write_relation(req: RelationWrite, graph: GraphIntakeDep, intake: IntakeDep, caller: CallerDep,
                         idempotency_key: IdempotencyKey = None) -> AcceptedResponse:
    """A relation between two entities given by id or name (names resolved through the gate). 202."""
    user = caller.user(req.user_id)
    fp = fingerprint("POST", "/v1/graph/relations", req.model_dump(mode="json"))
    return await once(intake, caller, user, idempotency_key, fp, lambda: graph.submit_relation(req, user))


@on(router, routes.ADD_FACT)
async def write_fact(req: FactWrite, graph: GraphIntakeDep, intake: IntakeDep, caller: CallerDep,
                     idempotency_key: IdempotencyKey = None) -> AcceptedResponse:
    """A subject-predicate-object fact; a single-valued predicate supersedes the subject's older fact. 202."""
    user = caller.user(req.user_id)
    fp = fingerprint("POST", "/v1/graph/facts", req.model_dump(mode="json"))
    return await once(intake, caller, user, idempotency_key, fp, lambda: graph.submit_relation(req, user))


@on(router, routes.FACTS, responses=responses(404))
async def facts_by_name(
    graph: GraphFactsDep, caller: CallerDep, name: NameQuery = None, entity_id: EntityIdQuery = None,
    user_id: OptionalUserQuery = None, project_id: GraphProjectQuery = None, include_history: bool = True,
    limit: PageLimit = PAGE, cursor: Cursor = None,
) -> EntityFactsPage:
    """The facts about the entity a name (its name, an alias, a merged entity's name) or an id stands for."""
    return await graph.entity_facts(caller.user(user_id), entity_id=entity_id, name=name, project_id=project_id,
                                    include_history=include_history, limit=limit, cursor=cursor)


@on(router, routes.ENTITY_FACTS, responses=responses(404))
async def entity_facts(
    entity_id: EntityId, graph: GraphFactsDep, caller: CallerDep, user_id: OptionalUserQuery = None,
    include_history: bool = True, limit: PageLimit = PAGE, cursor: Cursor = None,
) -> EntityFactsPage:
    """The facts about an entity (a merged one: its target's), both directions, current first, then history."""
    return await graph.entity_facts(caller.user(user_id), entity_id=entity_id, name=None, project_id=None,
                                    include_history=include_history, limit=limit, cursor=cursor)


@on(router, routes.QUERY_GRAPH)
async def query(req: GraphQuery, graph: GraphFactsDep, caller: CallerDep) -> FactPage:
    """Typed relations: subject / subject_type / predicate / object / object_type, valid at as_of. Paged."""
    with lowered(req.max_sensitivity):  # the body's own ceiling, below the key's
        return await graph.query(req, caller.user(req.user_id))


@on(router, routes.COMMUNITIES)
async def communities(graph: GraphFactsDep, caller: CallerDep, user_id: OptionalUserQuery = None,
                      limit: PageLimit = PAGE, cursor: Cursor = None) -> CommunityPage:
    """The user's entity communities (as the last rebuild grouped them), biggest first, with live members."""
    return await graph.communities(caller.user(user_id), limit, cursor)


@on(router, routes.REBUILD_COMMUNITIES)
async def rebuild_communities(req: CommunityRebuild, graph: GraphIntakeDep, intake: IntakeDep, caller: CallerDep,
                              idempotency_key: IdempotencyKey = None) -> AcceptedResponse:
    """Group the user's entities into communities now (a daily cron does it for every user). 202; poll."""
    user = caller.user(req.user_id)
    fp = fingerprint("POST", "/v1/graph/communities/rebuild", req.model_dump(mode="json"))
    return await once(intake, caller, user, idempotency_key, fp, lambda: graph.submit_communities(user))
