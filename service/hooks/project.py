"""Which project a hook event belongs to.

In order, the first that gives a valid id wins:

1. `MEMORY_PROJECT_ID`;
2. a `.memory-project` file in `cwd` or a parent directory: its first non-empty line that is not a
   `#` comment;
3. the repository name of the git remote `origin` (`git@github.com:acme/shop-api.git` -> `shop-api`),
   read from the repository's config file (`.git/config`; for a worktree or submodule, the file the
   `.git` file points to) without running git;
4. the name of the directory: the git work tree's top directory when `cwd` is inside one, else `cwd`.

Every candidate is normalised to the API's id rules (`^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$`): other
characters become `-`, runs of `-` collapse, leading characters that are not letters or digits are
dropped, the result is cut to 128 characters. A candidate that normalises to nothing is skipped;
when none is left the id is None (the hooks then use global scope).

Walking up is bounded (64 levels), and every file read is bounded (64 KiB).
"""

from __future__ import annotations

import re
from pathlib import Path

PROJECT_FILE = ".memory-project"
ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@\-]{0,127}$")
MAX_LEVELS = 64
MAX_READ = 64 * 1024

_BAD_CHARS = re.compile(r"[^A-Za-z0-9_.:@\-]+")
_SECTION = re.compile(r'^\[\s*([A-Za-z0-9.\-]+)(?:\s+"((?:[^"\\]|\\.)*)")?\s*\]')


def normalize_id(raw: str | None) -> str | None:
    """`raw` as a valid API id, or None when nothing valid is left."""
    if not raw:
        return None
    value = _BAD_CHARS.sub("-", raw.strip())
    value = re.sub(r"-{2,}", "-", value)
    value = re.sub(r"^[^A-Za-z0-9]+", "", value)[:128].rstrip("-")
    return value if ID_RE.match(value) else None


def _read(path: Path) -> str | None:
    try:
        with path.open("r", encoding="utf-8", errors="replace") as f:
            return f.read(MAX_READ)
    except OSError:
        return None


def _parents(start: Path) -> list[Path]:
    levels = [start, *start.parents]
    return levels[:MAX_LEVELS]


def from_project_file(start: Path) -> str | None:
    for directory in _parents(start):
        candidate = directory / PROJECT_FILE
        if candidate.is_file():
            text = _read(candidate) or ""
            for line in text.splitlines():
                line = line.strip()
                if line and not line.startswith("#"):
                    return normalize_id(line)
            return None  # an empty file stops the walk: the nearest file is the one that counts
    return None


def find_git(start: Path) -> tuple[Path, Path] | None:
    """(work tree top, config file) of the repository containing `start`, or None."""
    for directory in _parents(start):
        dot_git = directory / ".git"
        if dot_git.is_dir():
            git_dir = dot_git
        elif dot_git.is_file():
            text = (_read(dot_git) or "").strip()
            if not text.startswith("gitdir:"):
                continue
            git_dir = (directory / text[len("gitdir:"):].strip()).resolve()
        else:
            continue
        common = _read(git_dir / "commondir")  # a linked worktree keeps its config in the common dir
        if common and common.strip():
            git_dir = (git_dir / common.strip()).resolve()
        return directory, git_dir / "config"
    return None


def origin_url(config_text: str) -> str | None:
    """`remote.origin.url` from a git config file's text (the last value wins, as in git)."""
    section: tuple[str, str | None] | None = None
    url = None
    for raw in config_text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        header = _SECTION.match(line)
        if header:
            section = (header.group(1).lower(), header.group(2))
            continue
        if section != ("remote", "origin") or "=" not in line:
            continue
        key, value = line.split("=", 1)
        if key.strip().lower() == "url":
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] == '"':
                value = value[1:-1]
            url = value
    return url or None


def repo_name(url: str) -> str | None:
    """The repository name in a remote URL: `https://host/acme/shop-api.git/` -> `shop-api`."""
    tail = url.strip().rstrip("/\\")
    tail = re.split(r"[/\\:]", tail)[-1]
    if tail.endswith(".git"):
        tail = tail[: -len(".git")]
    return tail or None


def resolve_project_id(cwd: Path, explicit: str | None = None) -> str | None:
    """The project id for an event whose working directory is `cwd` (see the module docstring)."""
    chosen = normalize_id(explicit)
    if chosen:
        return chosen
    try:
        start = cwd.resolve()
    except (OSError, RuntimeError):
        start = cwd
    chosen = from_project_file(start)
    if chosen:
        return chosen
    git = find_git(start)
    if git is not None:
        top, config = git
        url = origin_url(_read(config) or "")
        name = repo_name(url) if url else None
        chosen = normalize_id(name)
        if chosen:
            return chosen
        return normalize_id(top.name)
    return normalize_id(start.name)
