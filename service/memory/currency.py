"""The current value first (docs/retrieval.md "The current value first"): a last pass over a search's results that
puts a newer statement of a change above an older result about the same thing, when the write path could not tell
for sure that one replaces the other (no frame, no shared slot word close enough to supersede it:
service/memory/changes.py).

Both are among the query's results, which is the evidence that they answer the same question; the pass then asks:
- the newer one says that something changed ("we're closed Tuesdays now", "aisle seats from now on", "we bumped
  Orion to Postgres 16") in the user's own words (a labelled transcript's lines are chatter: left alone);
- it is newer by the day it was said;
- they are about the same thing the query asks: they share two names or content words of the changing clause
  ("Orion" and "Postgres"; "lesson" and "plan"), or one content word that the query names too ("seat" for "what kind
  of seat do I want"), and name no different relative ("my sister" and "my brother" are two people: neither moves
  above the other, nor above the user's own). One shared name alone is not enough: "we bumped Orion to Postgres 16"
  says nothing of who leads Orion. "My partner and I" is the user; one shared content word with another name on
  each side is one slot ("monitoring is Datadog" / "we're on Grafana now"); a number of one unit is a restated value
  ("0.81 AUC" / "0.86 AUC");
- the newer one is among the query's first five results (`REACH`), and for a "who" question it names someone.
The newer one moves to just above the older one (one place per pair, the best-ranked older one first); it carries a
`newer` signal whose rank is the place it took. Nothing else moves, and nothing leaves the list.
"""

from __future__ import annotations

import re
from typing import Final

from service.memory.changes import changed_words, changes, changing_clause, clauses, said_by, slot_words
from service.memory.windows import speaker_label
from service.schemas.search import SearchResult, Signal
from service.search.context_format import days

NEWER: Final = "newer"  # the signal this pass adds (service/schemas/search.py Signal)
REACH: Final = 5  # only a result among the query's first five moves: one further down answers something else
_NAME = re.compile(r"(?<![\w.])([A-Z][\w.+#-]*[A-Za-z0-9+#])")
_RELATIVE = re.compile(r"\b(?:my|our) (mum|mom|mother|dad|father|sister|brother|wife|husband|partner|son|daughter|"
                       r"kid|kids|friend|boss|cousin|aunt|uncle|grandma|grandpa|neighbou?r)\b", re.IGNORECASE)
# "my partner Efua and I", "me and my sister": the user among others, which is the user's own statement
_WITH_ME = re.compile(r"\b(?:my|our) \w+(?: [A-Z]\w+)? and I\b|\bme and (?:my|our) \w+", re.IGNORECASE)


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
    """The day it was said (not the day it names: "this year" said in February is no statement of January)."""
    return days(result.occurred_at, result.created_at, result.metadata)[0] or ""


# a value whose shape says what it measures: 18,000 and 22,000; 450k and 500k; 3:30 and 3:45; $19; 20%; and a
# number of one unit ("0.81 AUC" and "0.86 AUC", "50 mcg" and "75 mcg"), whose shape is the unit
_VALUE = re.compile(r"(?P<thousands>\b\d{1,3}(?:,\d{3})+\b)|(?P<k>\b\d+(?:\.\d+)?k\b)|(?P<clock>\b\d{1,2}:\d{2}\b)|"
                    r"(?P<money>\$\d[\d,.]*)|(?P<percent>\b\d+(?:\.\d+)?%)|"
                    r"(?P<unit>\b\d+(?:\.\d+)?) ?(?P<of>[A-Za-z]{2,}\b)", re.IGNORECASE)
_NOT_UNIT = frozenset({"am", "pm", "and", "or", "to", "of", "in", "on", "at", "the", "a", "an", "for", "is", "are"})
_LEAD = re.compile(r"^\W*(?:(?:so|and|but|now|ok|okay|also|update)\W+)*([A-Z][\w.+#-]*)")


def _values(text: str) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for found in _VALUE.finditer(text):
        if found.group("unit") is not None:
            if found.group("of").casefold() in _NOT_UNIT:
                continue
            out.setdefault("unit:" + found.group("of").casefold(), set()).add(found.group("unit"))
            continue
        shape = found.lastgroup or ""
        out.setdefault(shape, set()).add(found.group(0).casefold())
    return out


def restates_value(new: str, old: str) -> bool:
    """The newer names another value of a shape the older has (22,000 after 18,000; 3:45 after 3:30)."""
    mine, theirs = _values(new), _values(old)
    return any(mine[shape] != theirs[shape] for shape in mine.keys() & theirs.keys())


def _subjects(text: str) -> set[str]:
    """The names a changing clause opens with ("Kite is on Next.js now": Kite)."""
    return {m.group(1).casefold() for c in clauses(text) if changing_clause(c) and (m := _LEAD.match(c))}


def _relatives(text: str) -> set[str]:
    return {r.casefold() for r in _RELATIVE.findall(_WITH_ME.sub("we", text))}


def _same_thing(new: str, old: str, query: str) -> bool:
    if _relatives(new) != _relatives(old):
        return False
    # what changed; a restated value ("we're at 0.86 AUC") has no changing clause: all its words
    words = (changed_words(new) if any(changing_clause(c) for c in clauses(new)) else slot_words(new)) & slot_words(old)
    anchors = (_names(new) & _names(old)) | words
    if len(anchors) >= 2 or words & slot_words(query):
        return True
    if words and _names(new) - _names(old) and _names(old) - _names(new):
        return True  # one thing named by a word both say, with another name for it ("monitoring is Datadog")
    if anchors and restates_value(new, old):
        return True
    asked = {w.casefold() for w in re.findall(r"[\w.+#-]+", query)}
    return bool(_subjects(new) & _names(old) & asked)  # the thing the query names is what changed


_WHO = re.compile(r"^\W*who(?:m|se)?\b", re.IGNORECASE)


def _answers_who(text: str) -> bool:
    """A statement that could answer "who ...?": it names someone ("Diego", "my mom")."""
    return bool(_names(text) or _RELATIVE.search(text))


def newer_first(results: list[SearchResult], query: str) -> list[SearchResult]:
    """The results with each newer statement of a change moved just above the best-ranked older result about the
    same thing that outranks it."""
    out = list(results)
    words = {r.id: _words(r) for r in out}
    asks_who = bool(_WHO.match(query))
    for later in [r for r in results[:REACH] if words[r.id] and not (asks_who and not _answers_who(words[r.id]))]:
        at = out.index(later)
        older = next((i for i, r in enumerate(out[:at])
                      if words[r.id] and _when(r) < _when(later)
                      and (changes(words[later.id]) or restates_value(words[later.id], words[r.id]))
                      and _same_thing(words[later.id], words[r.id], query)), None)
        if older is None:
            continue
        out.pop(at)
        out.insert(older, _moved(later, older))
    return out


def _moved(result: SearchResult, at: int) -> SearchResult:
    """`result` with the `newer` signal of the place `at` (0-based) it moved to."""
    return result.model_copy(update={"signals": [*result.signals, Signal(retriever=NEWER, rank=at + 1, score=0.0)]})


def successors_first(results: list[SearchResult], retired: dict[str, set[str]]) -> list[SearchResult]:
    """The results with the memory that retired every graph fact of an older result (`lives_in Porto` after
    `lives_in Lisbon`: service/stores/graph.py `RetiredFacts`) moved just above it when it ranked below; it carries
    the `newer` signal too."""
    out = list(results)
    for old_id, later_ids in retired.items():
        at = next((i for i, r in enumerate(out) if r.id == old_id), None)
        later = next((j for j, r in enumerate(out) if r.id in later_ids), None)
        if at is None or later is None or later < at:
            continue
        out.insert(at, _moved(out.pop(later), at))
    return out
