"""The worker side of the job kinds (service/registry.py `JobHandlers`), built once per worker process on the
process's clients and write-path parts (service/deps.py): the API side never builds them, so a route cannot
reach one. The tiers' writers take the graph store through the narrow Protocol each uses."""

from __future__ import annotations

from typing import Any

from service.ai.offline.extractor import RuleLinkFinder
from service.conversations.writes import ConversationWriter
from service.deps import Deps
from service.graph_api.communities import Communities
from service.maintenance.optimize import IndexBuilder
from service.maintenance.reconcile import Reconciler
from service.maintenance.reembed import Reembedder
from service.maintenance.sweep import DedupSweep
from service.memory.portability import Importer
from service.registry import JobHandlers, MemoryWrites
from service.runs.writes import RunWriter
from service.writepath.graph_writes import GraphWrites
from service.writepath.writes import MemoryWriter
from worker.retry import RetryClock


def job_handlers(deps: Deps) -> JobHandlers:
    s, embedder = deps.settings, deps.embedder  # the write path's embedder
    ledger = deps.ledger
    writer = MemoryWriter(s.redis, s.search, s.access, s.calibration, deps.tasks, deps.kv, deps.vectors, deps.graph,
                          ledger, deps.locks, embedder, deps.extractor, RuleLinkFinder(), deps.usage)
    return JobHandlers(
        writes=MemoryWrites(raw=writer.raw.one, raw_batch=writer.raw.batch, conversation=writer.conversation.run,
                            update=writer.update.run, delete=writer.delete.run, graph=GraphWrites(writer).store),
        importer=Importer(deps.tasks, deps.kv, embedder, ledger, deps.graph),
        sweep=DedupSweep(s.redis, s.dedup, s.calibration.dedup, deps.vectors, ledger, deps.redis),
        reconciler=Reconciler(writer, s.writepath),
        reembedder=Reembedder(s.redis, deps.tasks, deps.vectors, embedder, deps.locks, ledger),
        indexer=IndexBuilder(deps.vectors),
        runs=RunWriter(s.redis, deps.tasks, deps.kv, deps.graph.runs, embedder),
        conversations=ConversationWriter(deps.graph.conversations),
        communities=Communities(deps.graph.communities, deps.graph.reads,
                                deps.llm.community_summarizer() if deps.llm is not None else None),
    )


def worker_context(deps: Deps) -> dict[str, Any]:
    """What every job and cron is handed (ARQ's `ctx`): the process's clients and the worker side built on them."""
    return {"deps": deps, "handlers": job_handlers(deps), "retry_clock": RetryClock()}
