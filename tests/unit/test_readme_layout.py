"""The module map (docs/architecture.md, "Module map") and the README's short layout name only modules and
folders that exist (a map once named service/memory_service.py long after it was gone)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def layout_block() -> str:
    doc = (ROOT / "docs" / "architecture.md").read_text()
    readme = (ROOT / "README.md").read_text()
    return doc.split("## Module map", 1)[1].split("```", 2)[1] + readme.split("## Layout", 1)[1].split("```", 2)[1]


def named(block: str) -> list[tuple[str, str]]:
    """(top-level folder, name) for every `x.py` and `x/` a line of the block names."""
    out: list[tuple[str, str]] = []
    top = ""
    for line in block.splitlines():
        if line and not line.startswith(" "):
            top = line.split()[0].rstrip("/")
        for name in re.findall(r"(?<![\w.])([\w\-]+\.py|[\w\-]+/)(?=[\s,)|:]|$)", line):
            out.append((top, name))
    return out


def test_every_module_the_layout_names_exists() -> None:
    entries = named(layout_block())
    assert len(entries) > 100  # the parser found the block's names
    missing = []
    for top, name in entries:
        base = ROOT / top if (ROOT / top).is_dir() else ROOT
        if name.endswith("/"):
            found = (ROOT / name).is_dir() or any(p.is_dir() for p in base.rglob(name.rstrip("/")))
        else:
            found = any(base.rglob(name))
        if not found:
            missing.append(f"{top}/: {name}")
    assert not missing, f"the module map names what does not exist: {missing}"


def test_the_check_would_catch_a_missing_module() -> None:
    assert ("service", "memory_service.py") in named("service/   the API\n  x.py, memory_service.py   gone\n")
    assert not any((ROOT / "service").rglob("memory_service.py"))
