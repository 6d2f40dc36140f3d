"""Layer rules: service/ never imports worker/, and importing the worker package reads no settings."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_service_never_imports_worker() -> None:
    offenders = []
    for path in (ROOT / "service").rglob("*.py"):
        if path.name == "__main__.py" and path.parent.name == "service":
            continue  # `python -m service` is the one place that hands the embedded worker to the app
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{path.relative_to(ROOT)}: {n}" for n in names if n == "worker" or n.startswith("worker.")]
    assert offenders == []


def test_importing_worker_reads_no_settings_until_arq_asks() -> None:
    env = {**os.environ, "ARQ_MAX_JOBS": "not-a-number"}  # a broken setting: reading settings would fail
    code = ("import worker, worker.jobs, worker.crons\n"
            "try:\n    worker.WorkerSettings\nexcept SystemExit as e:\n    print(e.code)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    # only the access to WorkerSettings reads them, and a broken one is one line (service.settings.load_settings)
    assert out.stdout.strip() == "ARQ_MAX_JOBS: must be a valid integer, unable to parse string as an integer " \
                                 "(got not-a-number)"


def test_worker_settings_register_one_function_per_job_kind() -> None:
    from service.registry import FUNCTIONS
    from service.settings import Settings
    from worker import build_worker_settings

    ws = build_worker_settings(Settings(_env_file=None))  # type: ignore[call-arg]
    names = sorted(f.name for f in ws.functions)  # type: ignore[attr-defined]
    assert names == sorted(FUNCTIONS.values())
    assert "process_memory_write" not in names  # dedup is not routed through the memory-write function


def test_only_the_ledger_writes_memories_to_the_graph() -> None:
    """The graph's memory writes are called from the ledger's GraphWriter (and the ledger) only."""
    writes = {"upsert_memories", "replace_memory", "remove_memories", "import_graph", "import_identity"}
    owners = {"service/ledger.py", "service/graph_writer.py"}
    callers = set()
    for path in [*(ROOT / "service").rglob("*.py"), *(ROOT / "worker").rglob("*.py")]:
        rel = str(path.relative_to(ROOT))
        if rel.startswith("service/stores/"):
            continue  # the backends themselves
        for node in ast.walk(ast.parse(path.read_text(), rel)):
            if isinstance(node, ast.Attribute) and node.attr in writes and isinstance(node.ctx, ast.Load):
                receiver = node.value.attr if isinstance(node.value, ast.Attribute) else getattr(node.value, "id", "")
                if receiver != "ledger":  # the ledger's own methods of the same name
                    callers.add(rel)
    assert callers <= owners, sorted(callers - owners)
    assert callers == owners  # the rule is live: both owners do write


def _sources() -> list[tuple[str, ast.AST]]:
    """service/ and worker/ outside the store backends, parsed."""
    out = []
    for path in [*(ROOT / "service").rglob("*.py"), *(ROOT / "worker").rglob("*.py")]:
        rel = str(path.relative_to(ROOT))
        if not rel.startswith("service/stores/"):
            out.append((rel, ast.parse(path.read_text(), rel)))
    return out


def test_only_the_ledger_writes_memories_to_the_vector_store() -> None:
    """The vector store's writes (`upsert`, `delete`) are called from the ledger only. Other objects have methods of
    those names (Redis, a router, the ledger's GraphWriter): a receiver this test does not know is reported, so a
    new caller is looked at, and named below only if it is not a vector store."""
    not_vector_stores = {"_redis", "redis", "pipe", "router", "graph_writer", "ledger",
                         "client", "Routes",  # the HTTP client (service/client/) and its route table
                         "_pool"}  # ARQ's Redis pool (worker/claiming.py)
    callers = set()
    for rel, tree in _sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in {"upsert", "delete"} and isinstance(node.ctx, ast.Load):
                receiver = node.value.attr if isinstance(node.value, ast.Attribute) else getattr(node.value, "id", "")
                if receiver not in not_vector_stores:
                    callers.add(f"{rel}: {receiver}.{node.attr}")
    assert {c.split(":")[0] for c in callers} == {"service/ledger.py"}, sorted(callers)


def test_only_the_ledger_holds_the_graphs_memory_writes() -> None:
    """`MemoryGraphWrites` is named by the ledger and its GraphWriter (the dedup sweep wraps a graph store it is
    handed in a Ledger of its own), and only deps.py builds the graph backend that implements it."""
    holders, builders = set(), set()
    for rel, tree in _sources():
        for node in ast.walk(tree):
            if (isinstance(node, ast.Name) and node.id == "MemoryGraphWrites") or (
                    isinstance(node, ast.alias) and node.name == "MemoryGraphWrites"):
                holders.add(rel)
            if isinstance(node, ast.alias) and node.name == "Neo4jGraphStore":
                builders.add(rel)
    assert holders <= {"service/ledger.py", "service/graph_writer.py", "service/maintenance/sweep.py"}, sorted(holders)
    assert "service/ledger.py" in holders
    assert builders == {"service/deps.py"}, sorted(builders)


def test_the_api_side_never_reaches_a_worker_side_handler() -> None:
    """Routes, the console and the MCP server take the API-side objects (the intakes, the reads) from `Deps`; the
    worker-side handlers (`Deps.jobs`, service/registry.py `JobHandlers`) are the worker's only."""
    offenders = []
    for rel, tree in _sources():
        if rel.startswith(("service/api/", "service/ui/", "service/mcp/")) or rel == "service/app.py":
            offenders += [f"{rel}:{node.lineno}" for node in ast.walk(tree)
                          if isinstance(node, ast.Attribute) and node.attr == "jobs"]
    assert offenders == []
    # the rule is live: the worker's own modules do reach them
    assert any(isinstance(node, ast.Attribute) and node.attr == "jobs"
               for rel, tree in _sources() if rel.startswith("worker/") for node in ast.walk(tree))
