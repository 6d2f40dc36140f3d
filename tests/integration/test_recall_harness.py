"""scripts/bench/recall.py on the shipped LoCoMo-layout sample, against `python -m service`.

Both ingest modes (turns: raw writes; sessions: the conversation path with source_message_ids) with the
local embedder (the default model, e5-small-v2). Floors are the figures measured on the sample (docs/benchmarks.md)
minus a margin, well above chance; they catch a broken ingestion, id mapping, retriever or fusion, they do
not rank models.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from scripts.bench.procs import ROOT, start_service, stop
from tests.conftest import MODEL_CACHE, unique

SAMPLE = ROOT / "tests/data/locomo_sample.json"
VARIANTS = ("dense", "lexical", "graph", "fused", "collapsed", "fused-replay", "fused-no-graph", "interleave")
# Floors over all 16 questions, the measured figures (docs/benchmarks.md) less a margin: turns dense R@1
# 0.562, fused R@1 0.344 / R@5 0.938, lexical R@5 0.719; sessions fused R@5 0.719. Chance with ~20 turns
# per user is ~0.05 at @1 and ~0.25 at @5; the hash embedder fails the dense @1 floor.
FLOORS = {("turns", "dense", 1): 0.35, ("turns", "fused", 1): 0.25, ("turns", "fused", 5): 0.8,
          ("turns", "lexical", 5): 0.5, ("sessions", "fused", 5): 0.55}


def run_recall(port: int, prefix: str, out: Path, ingest: str) -> tuple[subprocess.CompletedProcess[str], Any]:
    run = subprocess.run(
        [sys.executable, str(ROOT / "scripts/bench/recall.py"), "--data", str(SAMPLE),
         "--url", f"http://127.0.0.1:{port}", "--ingest", ingest, "--user-prefix", prefix, "--fit",
         "--json-out", str(out), "--timeout", "120"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    print(run.stdout)  # the per-category table (pytest -s shows it)
    assert run.returncode == 0, f"recall.py --ingest {ingest} exited {run.returncode}\n{run.stdout}\n{run.stderr}"
    return run, json.loads(out.read_text(encoding="utf-8"))


def check(report: Any, ingest: str, stdout: str) -> None:
    sample = json.loads(SAMPLE.read_text(encoding="utf-8"))
    questions = sum(1 for s in sample for q in s["qa"] if q["evidence"] and q["category"] != 5)
    assert report["questions"] == questions and report["problems"] == []
    rows = {(r["category"], r["variant"]): r for r in report["rows"]}
    for variant in VARIANTS:
        row = rows[("all", variant)]
        values = [row[f"recall@{k}"] for k in (1, 5, 10, 20)]
        assert all(0.0 <= v <= 1.0 for v in values) and values == sorted(values), row
        within = [row["recall@512t"], row["recall@1024t"]]
        assert all(0.0 <= v <= 1.0 for v in within) and within == sorted(within), row
    # what an agent gets: collapsed, some evidence within the first 1,024 tokens
    assert rows[("all", "collapsed")]["recall@1024t"] > 0.3, stdout
    # the harness recomputes the served fusion from the single-retriever lists: it must agree
    for k in (1, 5, 10, 20):
        assert rows[("all", "fused")][f"recall@{k}"] == rows[("all", "fused-replay")][f"recall@{k}"], stdout
    assert report["fit"]["train_questions"] + report["fit"]["test_questions"] == questions
    for (mode, variant, k), floor in FLOORS.items():
        if mode == ingest:
            got = rows[("all", variant)][f"recall@{k}"]
            assert got >= floor, f"{ingest} {variant} recall@{k} = {got:.3f} < floor {floor}\n{stdout}"


def test_recall_harness_on_sample(tmp_path: Path) -> None:
    env = {
        "REDIS_URL": os.environ["TEST_REDIS_URL"],
        "NEO4J_URI": os.environ["TEST_NEO4J_URI"],
        "NEO4J_DATABASE": os.environ.get("TEST_NEO4J_DATABASE", "memory"),
        "DATA_DIR": str(tmp_path / "data"),
        "ARQ_QUEUE_NAME": unique("test:recallq"),
        "EMBEDDER": "local",
        "MODEL_CACHE_DIR": str(MODEL_CACHE),  # the model files scripts/test.sh fetched
        "LOG_LEVEL": "WARNING",
    }
    proc, port = start_service(env, tmp_path / "service.log")
    try:
        turns, turns_report = run_recall(port, unique("locomo"), tmp_path / "turns.json", "turns")
        sessions, sessions_report = run_recall(port, unique("locomo"), tmp_path / "sessions.json", "sessions")
    finally:
        stop(proc)
    check(turns_report, "turns", turns.stdout)
    check(sessions_report, "sessions", sessions.stdout)
    # every memory of the conversation path names the turns it came from
    assert sessions_report["memories"] > 0
