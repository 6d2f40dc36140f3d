"""The Neo4j launcher's settings that are read before Java starts."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_an_unknown_garbage_collector_is_refused_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run([str(ROOT / "scripts/neo4j/run.sh"), "--home", str(tmp_path), "--port", "1"],
                          env={**os.environ, "NEO4J_GC": "Parallel"}, capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    assert done.stderr.strip() == "error: NEO4J_GC must be Serial or G1 (got Parallel)"
    assert not any(tmp_path.iterdir())  # nothing started, nothing written
