"""Typed FastAPI dependencies: each object a route is handed, taken from the app's `Deps` (service/deps.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, TypeVar

from fastapi import Depends, Request

from service.conversations.intake import ConversationIntake
from service.conversations.service import ConversationService
from service.deps import Deps
from service.graph_api.intake import GraphIntake
from service.graph_api.reads import GraphFacts
from service.memory.curation import Curation
from service.memory.graph_reads import GraphReads
from service.memory.intake import Intake
from service.memory.portability import Exporter
from service.memory.reads import MemoryReads
from service.memory.search import MemorySearch
from service.memory.traces import Traces
from service.runs.intake import RunIntake
from service.runs.service import RunService
from service.stores.tiers import EntitySearch

T = TypeVar("T")


async def get_deps(request: Request) -> Deps:  # async: a plain def runs in the threadpool
    deps: Deps = request.app.state.deps
    return deps


def provided(pick: Callable[[Deps], T]) -> Callable[[Request], Awaitable[T]]:
    """A dependency that hands a route one of the app's objects."""

    async def dependency(request: Request) -> T:
        return pick(await get_deps(request))

    return dependency


DepsDep = Annotated[Deps, Depends(get_deps)]
IntakeDep = Annotated[Intake, Depends(provided(lambda d: d.intake))]
MemoriesDep = Annotated[MemoryReads, Depends(provided(lambda d: d.memories))]
SearchDep = Annotated[MemorySearch, Depends(provided(lambda d: d.search))]
TracesDep = Annotated[Traces, Depends(provided(lambda d: d.traces))]
CurationDep = Annotated[Curation, Depends(provided(lambda d: d.curation))]
GraphReadsDep = Annotated[GraphReads, Depends(provided(lambda d: d.graph_reads))]
ExporterDep = Annotated[Exporter, Depends(provided(lambda d: d.exporter))]
RunsDep = Annotated[RunService, Depends(provided(lambda d: d.runs))]
RunIntakeDep = Annotated[RunIntake, Depends(provided(lambda d: d.run_intake))]
ConversationsDep = Annotated[ConversationService, Depends(provided(lambda d: d.conversations))]
ConversationIntakeDep = Annotated[ConversationIntake, Depends(provided(lambda d: d.conversation_intake))]
GraphIntakeDep = Annotated[GraphIntake, Depends(provided(lambda d: d.graph_intake))]
GraphFactsDep = Annotated[GraphFacts, Depends(provided(lambda d: d.graph_facts))]
EntitySearchDep = Annotated[EntitySearch, Depends(provided(lambda d: d.graph.entity_search))]
