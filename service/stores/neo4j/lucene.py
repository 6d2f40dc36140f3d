"""A user-typed term as a literal Lucene term (the full-text indexes of search.py and the name keys of
resolution.py)."""

from __future__ import annotations

_LUCENE_SPECIAL = frozenset('+-&|!(){}[]^"~*?:\\/')
_LUCENE_OPERATORS = frozenset({"AND", "OR", "NOT"})


def lucene_escape(term: str) -> str:
    """One user-typed term as a literal Lucene term: every query-syntax character is
    backslash-escaped (whitespace too, so it stays one clause) and the bare operators AND/OR/NOT
    are escaped so they are searched for, not applied."""
    escaped = "".join("\\" + ch if ch in _LUCENE_SPECIAL or ch.isspace() else ch for ch in term)
    return "\\" + escaped if term in _LUCENE_OPERATORS else escaped
