"""Retrieval traces (provenance): what a search with trace=true returned and which entities it used."""

from __future__ import annotations

from fastapi import APIRouter

from service import routes
from service.api.declared import on
from service.api.deps import TracesDep
from service.api.errors import responses
from service.api.params import PAGE, Cursor, EntityQuery, OptionalUserQuery, PageLimit, TraceId
from service.api.security import CallerDep
from service.schemas.curation import TraceOut, TracePage

router = APIRouter(prefix="/v1/traces", tags=["traces"])


@on(router, routes.TRACES)
async def traces(traces: TracesDep, caller: CallerDep, user_id: OptionalUserQuery = None,
                 entity_id: EntityQuery = None, limit: PageLimit = PAGE, cursor: Cursor = None) -> TracePage:
    """The traces that touched an entity (with entity_id; a merged entity's traces are its target's too),
    else all of the user's, newest first."""
    return await traces.list_traces(caller.user(user_id), entity_id, limit, cursor)


@on(router, routes.TRACE, responses=responses(404))
async def trace(trace_id: TraceId, traces: TracesDep, caller: CallerDep,
                user_id: OptionalUserQuery = None) -> TraceOut:
    return await traces.get_trace(trace_id, caller.user(user_id))
