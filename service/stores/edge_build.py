"""Building a Qdrant Edge shard's vector index without stopping the process that holds the shard.

`EdgeShard.optimize()` holds the GIL for its whole run, so `EdgeVectorStore.optimize` (this mixin) copies the
shard, builds the copy's index in a child process (`service.stores.edge_optimize`) and swaps the copy in, with the
updates made meanwhile replayed from a journal (docs/decisions.md, "Where the HNSW build runs")."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import qdrant_edge as qe
import structlog

from service.core.errors import Conflict, DependencyUnavailable
from service.stores.edge_layout import sibling

log = structlog.get_logger(__name__)
_T = TypeVar("_T")


class IndexBuild:
    """The index build of `EdgeVectorStore`, which owns the state below: reads wait on `_serving` and count in
    `_in_flight` (`_run`), and every update is appended to `_journal` while a copy is being built (`_update`)."""

    _dir: Path
    _shard: qe.EdgeShard | None
    _write_lock: asyncio.Lock
    _journal: list[qe.UpdateOperation] | None
    _serving: asyncio.Event
    _in_flight: int
    _optimizing: asyncio.Task[Any] | None
    _changes: int
    last_optimize: dict[str, Any]

    async def _run(self, fn: Callable[[qe.EdgeShard], _T]) -> _T:
        raise NotImplementedError

    def _write_sidecar(self, where: Path, changes: int = 0) -> None:
        raise NotImplementedError

    async def optimize(self) -> bool:
        """Build the indexes (segment merge + HNSW) without holding this process's GIL for the build.

        1. Under the write lock: flush, copy the shard directory to `<dir>.next`, start a journal of updates.
        2. A child process (`service.stores.edge_optimize`) optimizes the copy; reads and writes go on here.
        3. Under the write lock, with reads paused: close the live shard, swap the directories (the old one
           is kept as `<dir>.old` until the end, and a `<dir>.swap` marker says a swap is under way), load the
           optimized shard, replay the journal, flush; drop the marker and the old directory.
        A crash at any step leaves either the live shard or, after step 3 started, `<dir>.old` with every
        update: the next start restores it (`edge_layout.finish_migration`). Returns True when it changed anything."""
        if self._shard is None:
            raise DependencyUnavailable(f"qdrant edge store {self._dir} is not open")
        if self._optimizing is not None:
            raise Conflict(f"an index build of {self._dir} is already running")
        self._optimizing = asyncio.current_task()
        try:
            return await self._optimize()
        finally:
            self._optimizing = None

    async def _optimize(self) -> bool:
        staged = self._sibling("next")
        async with self._write_lock:
            await self._run(lambda s: s.flush())
            await asyncio.to_thread(shutil.rmtree, staged, True)
            await asyncio.to_thread(shutil.copytree, self._dir, staged)
            self._journal = []
            seen = self._changes  # what the build folds in; changes made meanwhile stay in the backlog
        try:
            started = time.perf_counter()
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "service.stores.edge_optimize", str(staged),
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            try:
                out, err = await proc.communicate()
            except BaseException:
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()
                raise
            if proc.returncode != 0:
                raise DependencyUnavailable(f"optimizing {staged} failed (exit {proc.returncode}): "
                                            f"{err.decode(errors='replace')[-500:]}")
            figures = json.loads(out.decode().strip().splitlines()[-1])
            build_s = time.perf_counter() - started
            async with self._write_lock:
                self._changes -= seen
                self._write_sidecar(staged, self._changes)
                pause_s = await self._swap_in(staged)
        except BaseException:
            self._journal = None
            await asyncio.to_thread(shutil.rmtree, staged, True)
            raise
        self.last_optimize = {**figures, "build_seconds": round(build_s, 2), "swap_pause_ms": round(pause_s * 1000, 1)}
        log.info("qdrant_edge_optimized", path=str(self._dir), **self.last_optimize)
        return bool(figures.get("changed"))

    async def _swap_in(self, staged: Path) -> float:
        """Step 3 of `optimize` (the caller holds the write lock); returns how long reads were paused."""
        old, marker = self._sibling("old"), self._sibling("swap")
        self._serving.clear()
        paused = time.perf_counter()
        try:
            for _ in range(10_000):  # bounded: in-flight reads finish in milliseconds
                if self._in_flight == 0:
                    break
                await asyncio.sleep(0.001)
            live, self._shard = self._shard, None
            journal, self._journal = self._journal or [], None

            def swap() -> qe.EdgeShard:
                assert live is not None
                live.flush()
                live.close()
                marker.touch()
                shutil.rmtree(old, ignore_errors=True)
                self._dir.rename(old)
                staged.rename(self._dir)
                shard = qe.EdgeShard.load(str(self._dir))
                for op in journal:
                    shard.update(op)
                shard.flush()
                marker.unlink()
                return shard

            self._shard = await asyncio.to_thread(swap)
        finally:
            self._serving.set()
        pause = time.perf_counter() - paused
        await asyncio.to_thread(shutil.rmtree, old, True)
        return pause

    def _sibling(self, suffix: str) -> Path:
        return sibling(self._dir, suffix)
