"""Layer rules: service/ never imports worker/, and importing the worker package reads no settings."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from scripts.bench.structure import (
    classes_defined_twice,
    cycles,
    floors,
    imports_of,
    internal,
    modules_of,
    neo4j_parts,
    re_exporting_inits,
)

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
    # only the access to WorkerSettings reads them, and a broken one is one line (service.core.settings.load_settings)
    assert out.stdout.strip() == "ARQ_MAX_JOBS: must be a valid integer, unable to parse string as an integer " \
                                 "(got not-a-number)"


def test_worker_settings_register_one_function_per_job_kind() -> None:
    from service.core.settings import Settings
    from service.registry import JOB_KINDS
    from service.tasks.functions import FUNCTIONS
    from worker import build_worker_settings

    ws = build_worker_settings(Settings(_env_file=None))  # type: ignore[call-arg]
    names = sorted(f.name for f in ws.functions)  # type: ignore[attr-defined]
    assert names == sorted(FUNCTIONS.values())
    assert sorted(k.kind for k in JOB_KINDS) == sorted(FUNCTIONS)  # the queue's table and the registry: one list
    assert all(FUNCTIONS[k.kind] == k.function for k in JOB_KINDS)
    assert "process_memory_write" not in names  # dedup is not routed through the memory-write function


def test_only_the_ledger_writes_memories_to_the_graph() -> None:
    """The graph's memory writes are called from the ledger's GraphWriter (and the ledger) only."""
    writes = {"upsert_memories", "replace_memory", "remove_memories", "import_graph", "import_identity"}
    owners = {"service/ledger/ledger.py", "service/ledger/graph_writer.py"}
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
    out: list[tuple[str, ast.AST]] = []
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
                         "_pool",  # ARQ's Redis pool (worker/claiming.py)
                         "writer",  # the memory writer's delete writer (service/writepath/writes.py `DeleteWrite`)
                         "writes"}  # the registry's memory write handlers (service/registry.py `MemoryWrites`)
    callers = set()
    for rel, tree in _sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in {"upsert", "delete"} and isinstance(node.ctx, ast.Load):
                receiver = node.value.attr if isinstance(node.value, ast.Attribute) else getattr(node.value, "id", "")
                if receiver not in not_vector_stores:
                    callers.add(f"{rel}: {receiver}.{node.attr}")
    assert {c.split(":")[0] for c in callers} == {"service/ledger/ledger.py"}, sorted(callers)


def test_only_the_ledger_holds_the_graphs_memory_writes() -> None:
    """`MemoryGraphWrites` is named by the ledger and its GraphWriter (the dedup sweep wraps a graph store it is
    handed in a Ledger of its own), and only deps.py builds the graph backend (`Neo4jGraphStore`, which assembles
    the executor and the parts, `MemoryGraph` among them) and hands its memory writes to the ledger."""
    holders, builders = set(), set()
    backend = {"Neo4jGraphStore", "Neo4jExecutor", "MemoryGraph"}
    for rel, tree in _sources():
        for node in ast.walk(tree):
            if (isinstance(node, ast.Name) and node.id == "MemoryGraphWrites") or (
                    isinstance(node, ast.alias) and node.name == "MemoryGraphWrites"):
                holders.add(rel)
            if isinstance(node, ast.alias) and node.name in backend:
                builders.add(rel)
    owners = {"service/ledger/ledger.py", "service/ledger/graph_writer.py", "service/maintenance/sweep.py"}
    assert holders <= owners, sorted(holders)
    assert "service/ledger/ledger.py" in holders
    assert builders == {"service/deps.py"}, sorted(builders)


def test_the_neo4j_parts_are_composed_not_mixed_in() -> None:
    """The Neo4j backend's parts share one executor through their constructors: no class of service/stores/neo4j/
    derives from another of them (an exception type aside), and none declares a method another provides."""
    classes: dict[str, list[str]] = {}
    stubs = []
    for path in (ROOT / "service" / "stores" / "neo4j").glob("*.py"):
        text = path.read_text()
        stubs += [path.name for line in text.splitlines() if "provided by" in line]
        for node in ast.walk(ast.parse(text, str(path))):
            if isinstance(node, ast.ClassDef):
                classes[node.name] = [ast.unparse(b) for b in node.bases]
    assert {"Neo4jExecutor", "Neo4jGraphStore", "MemoryGraph", "RetrievalGraph"} <= set(classes)  # the rule is live
    mixed = {name: bases for name, bases in classes.items() if any(b in classes for b in bases)}
    assert mixed == {}, mixed
    assert stubs == []


def test_no_neo4j_part_imports_another() -> None:
    """A part (a class of service/stores/neo4j/ built on the executor) imports no other part's module: what two
    parts share is a helper module (statements, rows, the entity step, full-text queries); only the facade,
    store.py, holds several parts."""
    edges = imports_of(_modules())
    parts = neo4j_parts(ROOT, edges)  # the facade's parts (not the Ceiling helper, also built on the executor)
    assert len(parts) >= 12 and "service.stores.neo4j.ceiling" not in parts  # the rule is live
    crossing = {part: sorted(edges[part] & (parts - {part})) for part in parts if edges[part] & (parts - {part})}
    assert crossing == {}


WHOLE_BACKEND = {"ensure_schema", "erase_tiers", "ping", "close", "transient_retries", "deadlock_retries",
                 "chunk_stats"}


def _members(path: Path, cls: str) -> tuple[set[str], set[str]]:
    """(methods, read-only properties) a class of `path` declares."""
    tree = ast.parse(path.read_text(), str(path))
    (node,) = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls]
    funcs = [f for f in node.body if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)]
    props = {f.name for f in funcs if any(ast.unparse(d) == "property" for d in f.decorator_list)}
    return {f.name for f in funcs} - props - {"__init__"}, props


def test_the_graph_store_is_its_parts_not_a_facade() -> None:
    """`GraphStore` holds the backend's parts, each behind its narrow Protocol, and declares only what is the whole
    backend's; `Neo4jGraphStore` builds the parts and delegates nothing to them, so a caller names the part it uses
    (`graph.reads.search_facts`) and service/deps.py can hand it that part alone."""
    methods, props = _members(ROOT / "service" / "stores" / "graph.py", "GraphStore")
    assert {"memories", "reads", "curation", "runs", "conversations"} <= props  # the rule is live
    assert methods <= WHOLE_BACKEND, sorted(methods - WHOLE_BACKEND)
    backend, backend_props = _members(ROOT / "service" / "stores" / "neo4j" / "store.py", "Neo4jGraphStore")
    assert backend | backend_props <= WHOLE_BACKEND, sorted((backend | backend_props) - WHOLE_BACKEND)


def test_package_inits_re_export_nothing() -> None:
    """An import names the module that defines what it takes: no package `__init__` of service/ or worker/ imports
    from its own package at its top level, save `service.client`, whose `from service.client import MemoryClient`
    is the documented import of the Python client."""
    assert [p for p in re_exporting_inits(ROOT) if p != "service.client"] == []
    client = (ROOT / "service" / "client" / "__init__.py").read_text()
    assert "from service.client.sync import" in client  # the rule is live: the one exception does re-export


def test_names_say_one_thing() -> None:
    """Each class name of service/ and worker/ is defined once; "Run" is an agent's task run, so no class of the
    maintenance, the task queue or the worker is named `Run...` (a maintenance run is always qualified: `Dedup...`,
    `Maintenance...`); the code, tests, scripts and README cite no issue, seed or session number (the history is
    docs/decisions.md's)."""
    modules = _modules()
    assert classes_defined_twice(modules) == {}
    defined = {node.name: str(path.relative_to(ROOT)) for path in modules.values()
               for node in ast.walk(ast.parse(path.read_text(), str(path))) if isinstance(node, ast.ClassDef)}
    assert "RunService" in defined and "MemoryGraph" in defined  # the rule is live: both sides are read
    runs = [f"{rel}: {name}" for name, rel in defined.items()
            if name.startswith("Run") and rel.startswith(("service/maintenance/", "service/tasks/", "worker/"))]
    assert runs == []
    history = re.compile(r"(?<![-\w])(issue|seed|session)s? #?\d+", re.IGNORECASE)
    number = "12"
    assert history.search(f"as issue {number} asked") and history.search(f"Seed #{number}") and not history.search(
        f"--seed {number}")
    texts = [ROOT / "README.md", *(path for base in ("service", "worker", "tests", "scripts")
                                    for path in (ROOT / base).rglob("*.py"))]
    cited = [f"{path.relative_to(ROOT)}:{lineno}" for path in texts
             for lineno, line in enumerate(path.read_text().splitlines(), 1) if history.search(line)]
    assert cited == []


def test_only_the_worker_builds_the_worker_side_handlers() -> None:
    """Routes, the console and the MCP server take the API-side objects (the intakes, the reads) from `Deps`; the
    worker-side handlers (service/registry.py `JobHandlers`) are built by the worker (worker/handlers.py) and handed
    to its jobs and crons in ARQ's context, so nothing outside worker/ and the registry can name them."""
    names = {"JobHandlers", "job_handlers", "worker_context"}
    naming = set()
    for rel, tree in _sources():
        for node in ast.walk(tree):
            if (isinstance(node, ast.Name) and node.id in names) or (
                    isinstance(node, ast.alias) and node.name in names):
                naming.add(rel)
    assert {rel for rel in naming if not rel.startswith("worker/")} == {"service/registry.py"}, sorted(naming)
    assert {"worker/handlers.py", "worker/jobs.py", "worker/crons.py", "worker/embedded.py"} <= naming
    deps = ast.parse((ROOT / "service" / "deps.py").read_text())
    fields = {ast.unparse(n.annotation) for c in ast.walk(deps) if isinstance(c, ast.ClassDef) and c.name == "Deps"
              for n in c.body if isinstance(n, ast.AnnAssign)}
    assert "JobHandlers" not in fields and "Ledger" in fields  # the write path's parts, not the handlers


def _modules() -> dict[str, Path]:
    return modules_of(ROOT)


def test_no_import_cycles() -> None:
    """No module of service/ or worker/ reaches itself through imports (Tarjan's strongly connected components)."""
    assert cycles(internal(imports_of(_modules()))) == []


MAX_FLOORS = 8  # the package tower (scripts/bench/structure.py): 15 before the restructuring; docs/decisions.md


def test_the_package_tower_stays_low() -> None:
    """The tallest stack of packages, each importing the next (a module at the top of service/ or worker/ counts
    as its own package), is at most MAX_FLOORS: an entry, the app or the worker, an interface or the handlers, the
    composition, a feature, the write path or retrieval, a backend, the core. A new floor is a decision (raise
    MAX_FLOORS and say why in docs/decisions.md), not an accident."""
    tower = floors(internal(imports_of(_modules())))
    assert len(tower) <= MAX_FLOORS, " -> ".join(tower)
    assert len(floors({"a.x": {"b.y"}, "b.y": {"c.z"}, "c.z": set(), "a.w": {"c.z"}})) == 3  # the measure counts


BACKENDS = ("service.stores.neo4j", "service.stores.qdrant_edge", "service.stores.qdrant_server",
            "service.stores.edge_", "service.stores.remote")


def test_only_the_composition_roots_import_store_backends_and_drivers() -> None:
    """deps.py builds the stores (the worker child, worker/child.py, the proxy of the API process's vector store that
    worker/supervisor.py serves);
    everything else sees the Protocols. No module outside stores/ imports a database driver."""
    offenders = []
    for mod, targets in imports_of(_modules()).items():
        if mod.startswith("service.stores"):
            continue
        backends = {t for t in targets if t.startswith(BACKENDS)}
        if backends and mod not in ("service.deps", "worker.child", "worker.supervisor"):
            offenders.append(f"{mod}: {sorted(backends)}")
        drivers = {t for t in targets if t in ("ext:neo4j", "ext:qdrant_client", "ext:qdrant_edge")}
        if drivers:
            offenders.append(f"{mod}: {sorted(drivers)}")
    assert offenders == []


def test_lower_layers_never_import_higher_ones() -> None:
    """The composition root (deps.py) is imported only by the entry layers (the API, the console, MCP, the worker,
    the app); the memory service never imports the graph API, search never imports runs or conversations."""
    entry = ("service.api", "service.ui", "service.mcp", "service.app", "service.__main__", "worker")
    rules: dict[str, Callable[[str], bool]] = {
        "service.deps": lambda m: m.startswith(entry) or m == "service.deps",
        "service.graph_api": lambda m: not m.startswith("service.memory"),
        "service.runs": lambda m: not m.startswith("service.search"),
        "service.conversations": lambda m: not m.startswith("service.search"),
    }
    offenders = [f"{mod} -> {target}" for mod, targets in imports_of(_modules()).items() for target in targets
                 for layer, allowed in rules.items()
                 if (target == layer or target.startswith(f"{layer}.")) and not allowed(mod)]
    assert offenders == []


def _layers() -> list[tuple[str, list[str]]]:
    """docs/architecture.md's ```layers block: (layer, [path prefixes]) top to bottom."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    block = text.split("```layers\n", 1)[1].split("```", 1)[0]
    out = []
    for line in block.splitlines():
        words = line.split()
        paths = [w for w in words if w.startswith(("service/", "worker/"))]
        out.append((" ".join(w for w in words if w not in paths), paths))
    return out


def _layer_of(path: str, layers: list[tuple[str, list[str]]]) -> tuple[int, str] | None:
    """(layer index, the entry that holds it) for a file path, by the longest matching entry."""
    best: tuple[int, str] | None = None
    for i, (_, entries) in enumerate(layers):
        for entry in entries:
            if (path == entry or (entry.endswith("/") and path.startswith(entry))) and (
                    best is None or len(entry) > len(best[1])):
                best = (i, entry)
    return best


def test_the_drawn_layers_hold_for_every_import() -> None:
    """Every module has a layer; an import goes to the same layer or a lower one; the drawing's packages form no
    loop (a -> b -> a through any others)."""
    layers = _layers()
    assert layers[0][0] == "entry" and len(layers) >= 8  # the parser found the block
    modules = _modules()
    place = {mod: _layer_of(str(path.relative_to(ROOT)), layers) for mod, path in modules.items()}
    assert [m for m, p in place.items() if p is None] == []
    upward, package_edges = [], set()
    for mod, targets in imports_of(modules).items():
        here = place[mod]
        for target in targets:
            there = place.get(target)
            if here is None or there is None:
                continue  # external
            if there[0] < here[0]:
                upward.append(f"{mod} ({layers[here[0]][0]}) -> {target} ({layers[there[0]][0]})")
            if there[1] != here[1]:
                package_edges.add((here[1], there[1]))
    assert upward == []
    graph: dict[str, set[str]] = {}
    for a, b in package_edges:
        graph.setdefault(a, set()).add(b)

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            node = todo.pop()
            if node == goal:
                return True
            if node not in seen:
                seen.add(node)
                todo.extend(graph.get(node, ()))
        return False

    assert sorted(f"{a} <-> {b}" for a, b in package_edges if reaches(b, a)) == []


def test_the_layer_check_would_catch_an_upward_import() -> None:
    layers = [("top", ["service/api/"]), ("bottom", ["service/core/", "service/core/x.py"])]
    assert _layer_of("service/api/memories.py", layers) == (0, "service/api/")
    assert _layer_of("service/core/x.py", layers) == (1, "service/core/x.py")  # the longest entry wins
    assert _layer_of("service/deps.py", layers) is None
