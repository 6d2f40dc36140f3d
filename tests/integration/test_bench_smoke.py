"""The fault benches still run (a bench the code leaves behind is a defect): starve.py's smoke mode starts its own
private stack (Redis with AOF, Neo4j, `python -m service`), pauses Redis for 3 s under 12 writes, and checks that the
table it prints says every write completed. It runs chaos.py's stack, writer and listing pieces too."""

from __future__ import annotations

import subprocess
import sys

from scripts.bench.procs import ROOT


def test_starve_smoke_prints_a_row_with_nothing_failed_or_lost() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench" / "starve.py"), "--smoke"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| redis-pause | 1 |")]
    assert len(rows) == 1, done.stdout[-2000:]
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    assert cells[2] == "12/12" and cells[3] == "12" and cells[4:8] == ["0", "0", "0", "0"], rows
    assert "smoke: OK" in done.stdout
