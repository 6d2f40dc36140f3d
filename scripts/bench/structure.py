"""The structure of service/ and worker/, measured from the code: modules, the largest, import cycles, the depth of
the import graph (strict: every import, those in functions and TYPE_CHECKING blocks too; and runtime: module-level
imports only), the floors of the package tower (the same graph with each package of service/ and worker/ one node),
package __init__ files that re-export, class names defined twice, imports from one Neo4j part to
another, the README's size.

    python scripts/bench/structure.py [--root DIR] [--smoke]

`--root` measures another checkout (a `git worktree` of an older commit), so two states compare side by side.
`--smoke`: the same measurement, then `smoke: OK` when its figures are sane (modules found, a chain, floors), else
`smoke: FAIL` and exit status 1.
tests/unit/test_layers.py reads the import graph through `modules_of` and `imports_of`, so the rules it holds and
the figures printed here are one reading.
"""

from __future__ import annotations

import argparse
import ast
import functools
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BASES = ("service", "worker")


def modules_of(root: Path) -> dict[str, Path]:
    """Module name -> file, for service/ and worker/."""
    out = {}
    for base in BASES:
        for path in (root / base).rglob("*.py"):
            parts = list(path.relative_to(root).with_suffix("").parts)
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _import_nodes(tree: ast.AST, runtime: bool) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import of a file, or (runtime) those at module level outside `if TYPE_CHECKING:`."""
    if not runtime:
        yield from (n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom))
        return
    assert isinstance(tree, ast.Module)
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If | ast.Try):
            yield from (n for n in ast.walk(node) if isinstance(n, ast.Import | ast.ImportFrom))


def imports_of(modules: dict[str, Path], runtime: bool = False) -> dict[str, set[str]]:
    """Module -> the modules of service/ and worker/ it imports (anywhere in the file: top level, functions,
    TYPE_CHECKING blocks; or only at runtime), and -> external top-level packages as "ext:<name>"."""

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, set[str]] = {}
    for mod, path in modules.items():
        found: set[str] = set()
        for node in _import_nodes(ast.parse(path.read_text(), str(path)), runtime):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                if node.level:
                    package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
                    for _ in range(node.level - 1):
                        package = package.rpartition(".")[0]
                    base = f"{package}.{node.module}" if node.module else package
                else:
                    base = node.module or ""
                names = [base, *(f"{base}.{a.name}" for a in node.names)]
            for name in names:
                target = owner(name)
                if target is None and name.split(".")[0] not in BASES:
                    found.add(f"ext:{name.split('.')[0]}")
                elif target is not None and target != mod and not mod.startswith(f"{target}."):
                    found.add(target)
        edges[mod] = found
    return edges


def internal(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    return {m: {t for t in ts if not t.startswith("ext:")} for m, ts in edges.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in edges:
        if v not in index:
            visit(v)
    return found


def condensed(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph with each cycle one node (named by its modules joined with "+"), so that it has a longest chain."""
    name = {m: "+".join(c) for c in cycles(edges) for m in c}
    out: dict[str, set[str]] = {}
    for m, targets in edges.items():
        node = name.get(m, m)
        out.setdefault(node, set()).update(name.get(t, t) for t in targets if name.get(t, t) != node)
    return out


def longest_chain(edges: dict[str, set[str]]) -> tuple[str, ...]:
    """The longest chain of modules, each importing the next (a graph without cycles: see `condensed`)."""

    @functools.cache
    def longest(m: str) -> tuple[str, ...]:
        return max(((m, *longest(t)) for t in edges[m]), key=len, default=(m,))

    return max((longest(m) for m in edges), key=len)


def package_of(module: str) -> str:
    """The package a module counts in for the tower: `service.writepath.writes` -> `service.memory`; a module at the
    top of service/ or worker/ (`service.deps`, `worker.jobs`) is its own."""
    return ".".join(module.split(".")[:2])


def packages(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """The import graph between packages (`package_of`), without a package's imports of itself."""
    out: dict[str, set[str]] = {}
    for m, targets in edges.items():
        out.setdefault(package_of(m), set()).update(package_of(t) for t in targets if package_of(t) != package_of(m))
    for targets in list(out.values()):
        for t in targets:
            out.setdefault(t, set())
    return out


def floors(edges: dict[str, set[str]]) -> tuple[str, ...]:
    """The tallest stack of packages, each importing the next: its length is the tower's floors."""
    return longest_chain(condensed(packages(edges)))


def re_exporting_inits(root: Path) -> list[str]:
    """Package __init__ files that import from their own package at module level."""
    out = []
    for base in BASES:
        for init in (root / base).rglob("__init__.py"):
            package = ".".join(init.parent.relative_to(root).parts)
            body = ast.parse(init.read_text(), str(init)).body
            if any(isinstance(n, ast.ImportFrom) and (n.level or (n.module or "").startswith(f"{package}."))
                   for n in body):
                out.append(package)
    return sorted(out)


def classes_defined_twice(modules: dict[str, Path]) -> dict[str, list[str]]:
    defined: dict[str, list[str]] = {}
    for mod, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                defined.setdefault(node.name, []).append(mod)
    return {name: where for name, where in defined.items() if len(where) > 1}


def neo4j_parts(root: Path, edges: dict[str, set[str]]) -> set[str]:
    """The Neo4j facade's parts: modules of service/stores/neo4j/ whose class is built on the executor and that
    store.py imports."""
    built_on_executor = set()
    for path in (root / "service" / "stores" / "neo4j").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef) and node.name == "__init__" and len(node.args.args) > 1 and \
                    ast.unparse(node.args.args[1].annotation or ast.Constant("")) == "Neo4jExecutor":
                built_on_executor.add(f"service.stores.neo4j.{path.stem}")
    return built_on_executor & edges.get("service.stores.neo4j.store", set())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to measure (default: this one)")
    parser.add_argument("--smoke", action="store_true",
                        help="a short check: measure, then `smoke: OK` when the figures are sane, else exit 1")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    modules = modules_of(root)
    edges = internal(imports_of(modules))
    runtime = internal(imports_of(modules, runtime=True))
    lines = {m: len(p.read_text().splitlines()) for m, p in modules.items()}
    largest = max(lines, key=lambda m: lines[m])
    found = cycles(edges)
    parts = neo4j_parts(root, edges)
    crossing = sorted(f"{p} -> {q}" for p in parts for q in edges[p] & (parts - {p}))
    twice = classes_defined_twice(modules)
    readme = root / "README.md"
    print(f"structure of {root}")
    print(f"modules in service/ + worker/        {len(modules)}")
    print(f"largest module                       {largest} ({lines[largest]} lines)")
    print(f"import cycles                        {len(found)} ({sum(map(len, found))} modules)")
    for c in found:
        print("  " + " <-> ".join(c))
    chain, runtime_chain = longest_chain(condensed(edges)), longest_chain(condensed(runtime))
    note = " (each cycle counted as one module)" if found else ""
    print(f"depth of the import graph (strict)   {len(chain) - 1}{note}")
    print("  " + " -> ".join(chain))
    print(f"depth, module-level runtime imports  {len(runtime_chain) - 1}{note}")
    tower = floors(edges)
    package_cycles = cycles(packages(edges))
    print(f"floors of the package tower          {len(tower)}" +
          (f" ({len(package_cycles)} package cycles, each one floor)" if package_cycles else ""))
    print("  " + " -> ".join(tower))
    exporting = re_exporting_inits(root)
    print(f"package __init__ re-exports          {len(exporting)} {exporting}")
    print(f"class names defined twice            {len(twice)} {sorted(twice)}")
    print(f"Neo4j part -> part imports           {len(crossing)}")
    for edge in crossing:
        print(f"  {edge}")
    if readme.exists():
        print(f"README                               {readme.stat().st_size / 1000:.1f} KB")
    if args.smoke:
        ok = (len(modules) > 0 and lines[largest] > 0 and len(chain) >= 2 and len(runtime_chain) >= 2
              and len(tower) >= 2 and all(m in modules for m in chain if "+" not in m))
        print(f"smoke: {'OK' if ok else 'FAIL'}")
        if not ok:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
