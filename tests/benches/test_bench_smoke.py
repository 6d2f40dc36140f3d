"""Every bench still runs (a bench the code leaves behind is a defect): each script under scripts/bench/ has a
`--smoke` mode, a few seconds of real work on the test stack (or a private stack it starts itself) that ends with
`smoke: OK` only when the figures it printed are there and sane. This module runs the benches that start their own
processes (a service, a private Redis and Neo4j); test_bench_smoke_stores.py runs the rest. scripts/test.sh runs
this folder after the rest of the suite, each bench on the next free test process.

starve.py's smoke also checks its table: it pauses Redis for 3 s under 12 writes, and every write completes."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from scripts.bench.procs import ROOT

BENCH = ROOT / "scripts" / "bench"
HELPERS = {"common.py", "procs.py", "graph_probe.py"}  # modules the benches and tests import, not benches
WITH_PROCESSES = ["assistant.py", "body_limit.py", "chaos.py", "console.py", "footprint.py", "local_llm.py",
                  "recall.py", "scale_out.py", "soak.py", "write_path.py"]
ON_THE_STORES = ["calibrate.py", "dedup.py", "embedder.py", "graph_contention.py", "graph_plans.py", "graph_write.py",
                 "record_fidelity.py", "resolution.py", "search.py", "structure.py"]


def smoke(script: str, timeout: float = 300) -> str:
    """Run `script --smoke` as a user runs it (the test stack's TEST_* variables in its environment); its stdout,
    after checking that it ended well and said so."""
    env = {**os.environ, "MODEL_CACHE_DIR": os.environ.get("MODEL_CACHE_DIR", str(ROOT / ".test-stack" / "models"))}
    done = subprocess.run([sys.executable, str(BENCH / script), "--smoke"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)
    assert done.returncode == 0, f"{script}: {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert done.stdout.rstrip().splitlines()[-1] == "smoke: OK", done.stdout[-3000:]
    return done.stdout


def test_every_bench_has_a_smoke_mode_that_the_suite_runs() -> None:
    benches = {p.name for p in BENCH.glob("*.py")} - HELPERS - {"__init__.py"}
    listed = set(WITH_PROCESSES) | set(ON_THE_STORES) | {"starve.py"}
    assert benches == listed, f"not run by the suite: {sorted(benches - listed)}; gone: {sorted(listed - benches)}"
    for name in sorted(benches):
        text = (BENCH / name).read_text()
        assert '"--smoke"' in text and "smoke: " in text, f"{name} has no --smoke mode"


@pytest.mark.parametrize("script", WITH_PROCESSES)
def test_a_bench_that_starts_processes_runs_its_smoke(script: str) -> None:
    smoke(script)


def test_starve_smoke_prints_a_row_with_nothing_failed_or_lost() -> None:
    out = smoke("starve.py")
    rows = [line for line in out.splitlines() if line.startswith("| redis-pause | 1 |")]
    assert len(rows) == 1, out[-2000:]
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    assert cells[2] == "12/12" and cells[3] == "12" and cells[4:8] == ["0", "0", "0", "0"], rows
