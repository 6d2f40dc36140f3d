"""Search signals in words a person reads: which retriever found a result, and at what rank."""

from __future__ import annotations

from typing import Any

WHAT = {
    "dense": "close in meaning to the query (semantic search)",
    "lexical": "shares words with the query (keyword search)",
    "graph": "mentions an entity the query names, or one of its neighbours (knowledge graph)",
    "time": "happened in the time the query names",
}


def duration(seconds: int) -> str:
    """A duration as a person says it: "7 days", "12 hours", "90 minutes"."""
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            n = seconds // size
            return f"{n} {unit}{'s' if n != 1 else ''}"
    return f"{seconds} seconds"


def when(value: object) -> str:
    """A stored time as people read it: "2026-12-07 19:04" (UTC, to the minute); a day stays a day; "—" for none."""
    text = str(value or "")
    if not text:
        return "—"
    return text[:10] if len(text) <= 10 else text[:16].replace("T", " ")


def ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def describe_signal(signal: Any) -> str:
    """'Found by keyword search: shares words with the query; ranked 2nd there (score 3.41).'"""
    name = str(getattr(signal, "retriever", ""))
    rank = int(getattr(signal, "rank", 0))
    score = float(getattr(signal, "score", 0.0))
    return f"{WHAT.get(name, name)}: ranked {ordinal(rank)} by the {name} retriever (its score {score:.3f})"
