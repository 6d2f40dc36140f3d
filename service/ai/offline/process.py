"""The offline extractor's rules in a process of their own (docs/write-path.md "Slowness is not an outage").

The rules are pure Python: on the worker's event loop they hold the GIL for the whole conversation (about 2 ms for
three short messages, tens of ms for a long chat), and every Redis or Neo4j call in flight waits for them, so a
timeout there measures the extractor, not the dependency. Here they run in one spawned process, started on the first
conversation (an API process that never extracts never starts it): the loop only sends the messages and receives
the facts.

A process that dies fails the call with DependencyUnavailable (the job is retried) and is started again on the next.
"""

from __future__ import annotations

import asyncio
import multiprocessing
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

import structlog

from service.ai.extraction import ExtractedFact, ExtractionResult, KnownMemory, Message, TokenUsage
from service.ai.offline.extractor import OfflineExtractor
from service.core.errors import DependencyUnavailable

log = structlog.get_logger(__name__)


def _extract(messages: list[Message], project_id: str | None, max_facts: int) -> list[ExtractedFact]:
    return OfflineExtractor(max_facts).extract_sync(messages, project_id)  # pragma: no cover - runs in the child


class ProcessExtractor:
    """The Extractor Protocol over OfflineExtractor's rules, run in a child process."""

    name = "offline"
    names_replacements = False

    def __init__(self, max_facts: int = 64) -> None:
        self.max_facts = max_facts
        self._pool: ProcessPoolExecutor | None = None

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
        return self._pool

    async def extract(self, messages: list[Message], project_id: str | None = None,
                      known: Sequence[KnownMemory] = ()) -> ExtractionResult:
        loop = asyncio.get_running_loop()
        try:
            facts = await loop.run_in_executor(self._executor(), _extract, messages, project_id, self.max_facts)
        except BrokenProcessPool as exc:
            log.warning("extractor_process_died", error=str(exc)[:200])
            self.close()  # the next call starts a new one
            raise DependencyUnavailable(f"the extractor process died: {exc}") from exc
        return ExtractionResult(facts=facts, extractor=self.name, usage=TokenUsage())

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
