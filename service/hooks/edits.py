"""What an edit changed, from its old and new strings, without copying them: the lines added and removed, and
the names (definitions, identifiers) it added or removed, found in the redacted text."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

from service.hooks.redact import redact

MAX_EDIT_CHARS = 20_000  # of each side of an edit that is analysed (cut at a line end)
_DEFINITION = re.compile(
    r"^[ \t]*(?:export[ \t]+)?(?:default[ \t]+)?(?:pub(?:\([a-z]+\))?[ \t]+)?(?:async[ \t]+)?"
    r"(def|class|function|fn|func|interface|struct|enum|trait)[ \t]+([A-Za-z_$][\w$]*)",
    re.M,
)
_KINDS = {"def": "function", "fn": "function", "func": "function", "function": "function"}
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,39}")
_NAMED = re.compile(r"(?<![A-Za-z0-9_])([A-Za-z_][A-Za-z0-9_]*)\s*(?::(?!:)|=(?!=)|\()")
_COMMON_WORDS = frozenset(
    {
        "and", "any", "are", "assert", "async", "await", "bool", "break", "case", "catch", "class", "const", "continue",
        "def", "default", "del", "dict", "elif", "else", "enum", "except", "export", "false", "final", "finally",
        "float", "for", "from", "func", "function", "import", "int", "interface", "isinstance", "lambda", "len", "let",
        "list", "new", "none", "nonlocal", "not", "null", "number", "object", "pass", "print", "private", "protected",
        "public", "raise", "redacted", "return", "self", "set", "static", "str", "string", "struct", "super", "switch",
        "the", "this", "throw", "true", "try", "tuple", "type", "undefined", "var", "void", "while", "with", "yield",
        "optional", "typing", "annotations"
    }
)


def _line_delta(old: str, new: str) -> tuple[int, int]:
    """(lines added, lines removed) as multisets of lines: linear, exact for insertions and deletions
    (a moved line counts as unchanged)."""
    a, b = Counter(old.splitlines()), Counter(new.splitlines())
    return sum((b - a).values()), sum((a - b).values())


def _head(text: str, limit: int = MAX_EDIT_CHARS) -> str:
    """At most `limit` characters of `text`, cut after a line end so no line (or secret) is cut."""
    if len(text) <= limit:
        return text
    cut = text.rfind("\n", 0, limit)
    return text[: cut + 1] if cut >= 0 else ""


def _definitions(text: str) -> dict[str, str]:
    return {m.group(2): _KINDS.get(m.group(1), m.group(1)) for m in _DEFINITION.finditer(text)}


def _identifiers(text: str) -> list[str]:
    seen: dict[str, None] = {}
    for word in _IDENTIFIER.findall(text):
        if word.lower() in _COMMON_WORDS or sum(c.isdigit() for c in word) >= 4:
            continue
        seen.setdefault(word, None)
    return list(seen)


def _names(items: Iterable[str], limit: int = 4) -> str:
    items = list(items)
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def edit_changes(pairs: list[tuple[str, str]]) -> tuple[str, int, int]:
    """What an edit changed, from its (old, new) strings: e.g. `added function parse, after`, with the lines
    added and removed."""
    old_text = "\n".join(o for o, _ in pairs)
    new_text = "\n".join(n for _, n in pairs)
    added, removed = _line_delta(old_text, new_text)
    old, new = redact(_head(old_text)), redact(_head(new_text))
    old_defs, new_defs = _definitions(old), _definitions(new)
    parts: list[str] = []
    gained = [f"{kind} {name}" for name, kind in new_defs.items() if name not in old_defs]
    lost = [f"{kind} {name}" for name, kind in old_defs.items() if name not in new_defs]
    old_ids = set(_identifiers(old))
    new_id_list = _identifiers(new)
    new_ids = set(new_id_list)
    defined = set(new_defs) | set(old_defs)
    named = {m.group(1) for m in _NAMED.finditer(new)}  # names being bound: `after: int`, `x = 1`, `f(`
    fresh = sorted(
        (w for w in new_id_list if w not in old_ids and w not in defined), key=lambda w: w not in named
    )
    gone = [w for w in _identifiers(old) if w not in new_ids and w not in defined]
    if gained or fresh:
        parts.append("added " + _names([*gained, *fresh]))
    if lost or gone:
        parts.append("removed " + _names([*lost, *gone]))
    if not parts:
        parts.append("reworded" if (added or removed) else "whitespace-only change")
    return "; ".join(parts), added, removed
