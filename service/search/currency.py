"""The current value first (docs/retrieval.md "The current value first"): a last pass over a search's results that
puts a newer statement of a change above an older result about the same thing, when the write path could not tell
for sure that one replaces the other (no frame, no shared slot word close enough to supersede it:
service/memory/changes.py).

Both are among the query's results, which is the evidence that they answer the same question; the pass then asks:
- the newer one says that something changed ("we're closed Tuesdays now", "aisle seats from now on", "we bumped
  Orion to Postgres 16") in the user's own words (a labelled transcript's lines are chatter: left alone);
- it is newer by the day it was said;
- they are about the same thing: they share a name ("Orion", "Kite") or a content word of the changing clause
  ("seat", "closed", "monitoring") and name no different relative ("my sister" and "my brother" are two people:
  neither moves above the other, nor above the user's own).
The newer one moves to just above the older one (one place per pair, the best-ranked older one first); it carries a
`newer` signal whose rank is the place it took. Nothing else moves, and nothing leaves the list.
"""

from __future__ import annotations

import re

from service.memory.changes import changed_words, changes, said_by, slot_words
from service.memory.windows import speaker_label
from service.schemas.search import SearchResult, Signal

_NAME = re.compile(r"(?<![\w.])([A-Z][\w.+#-]*[A-Za-z0-9+#])")
_RELATIVE = re.compile(r"\b(?:my|our) (mum|mom|mother|dad|father|sister|brother|wife|husband|partner|son|daughter|"
                       r"kid|kids|friend|boss|cousin|aunt|uncle|grandma|grandpa|neighbou?r)\b", re.IGNORECASE)


def _words(result: SearchResult) -> str:
    """The user's own words in a result ("" for a labelled transcript's line, which this pass leaves alone)."""
    if speaker_label(result.content.split("\n", 1)[0].removeprefix("user: ")):
        return ""
    return said_by(result.content, None)


def _names(text: str) -> set[str]:
    """Names inside sentences (not a sentence's first word): "Orion", "Kite", "Postgres"."""
    out = set()
    for found in _NAME.finditer(text):
        before = text[: found.start()].rstrip()
        if before and before[-1] not in ".!?:;":
            out.add(found.group(1).casefold())
    return out


def _when(result: SearchResult) -> str:
    return (result.occurred_at or result.created_at or "")[:10]


def _same_thing(new: str, old: str) -> bool:
    if {r.casefold() for r in _RELATIVE.findall(new)} != {r.casefold() for r in _RELATIVE.findall(old)}:
        return False
    return bool((_names(new) & _names(old)) or (changed_words(new) & slot_words(old)))


def newer_first(results: list[SearchResult]) -> list[SearchResult]:
    """The results with each newer statement of a change moved just above the best-ranked older result about the
    same thing that outranks it."""
    out = list(results)
    words = {r.id: _words(r) for r in out}
    for later in [r for r in results if words[r.id] and changes(words[r.id])]:
        at = out.index(later)
        older = next((i for i, r in enumerate(out[:at])
                      if words[r.id] and _when(r) < _when(later) and _same_thing(words[later.id], words[r.id])), None)
        if older is None:
            continue
        out.pop(at)
        out.insert(older, later.model_copy(update={
            "signals": [*later.signals, Signal(retriever="newer", rank=older + 1, score=0.0)]}))
    return out
