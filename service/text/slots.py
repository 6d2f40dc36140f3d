"""Words people use for the same thing: a question names a slot one way, the memory that answers it another ("which
CI do we use" / "every pipeline runs on GitHub Actions now", "what is my current address" / "sharing an apartment on
Maple Street", "how much can we spend" / "we raised our max to 500k"). The lexical retriever adds a query word's
companions to the query (service/search/lexical.py), so BM25 finds the memory that says it the other way.

Each group is everyday vocabulary of one slot, in the words people use for it, not the values (no product, place or
person names: which tools are CI servers or warehouses is world knowledge an LLM has and word lists go stale on).
A phrase can stand for a group ("who do I report to" names the manager). Only the query is widened: what is stored
and indexed stays as it was said. The correction rules compare slots through the same groups (`canonical`): "we
raised our max to 500k" restates "budget around 450k".
"""

from __future__ import annotations

import re

_GROUP_WORDS = (
    "ci pipeline pipelines build builds",
    "monitoring observability alerting",
    "budget max maximum spend spending afford",
    "manager boss supervisor",
    "principal headteacher headmaster headmistress",
    "invoice invoices invoicing bill billing",
    "address apartment flat",
    "salary wage wages pay paid earn earns",
    "husband wife spouse partner",
    "allergy allergies allergic",
    "doctor physician gp",
    "vet veterinarian",
    "car vehicle",
    "kids children",
    "birthday born",
    "roommate roommates flatmate flatmates housemate housemates",
    "hobby hobbies pastime",
)  # the first word of each names the group
GROUPS: tuple[frozenset[str], ...] = tuple(frozenset(g.split()) for g in _GROUP_WORDS)
PHRASES: tuple[tuple[re.Pattern[str], frozenset[str]], ...] = (
    (re.compile(r"\breports? to\b", re.IGNORECASE), frozenset({"manager", "boss"})),
    (re.compile(r"\bhead of (?:the |my |our )?school\b", re.IGNORECASE), frozenset({"principal"})),
    (re.compile(r"\bwhere (?:do|does|did) (?:I|we|he|she|they) live\b", re.IGNORECASE),
     frozenset({"address", "apartment", "moved"})),
)
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*")
_BY_WORD = {word: group for group in GROUPS for word in group}
_HEAD = {word: g.split()[0] for g in _GROUP_WORDS for word in g.split()}
GROUPED = frozenset(_HEAD)


def canonical(word: str) -> str:
    """One name for every word of a slot group (lower-case in, the group's first word out: "pipeline" -> "ci");
    any other word as it is. Two statements that name one slot in different words share it
    (service/memory/changes.py `slot_words`)."""
    return _HEAD.get(word, word)


def companions(query: str) -> list[str]:
    """The words of the query's slot groups and phrases that the query does not say itself, in a stable order.
    Capitalised words inside the query are names ("my dog Max"), not vocabulary."""
    said: set[str] = set()
    out: set[str] = set()
    for found in _WORD.finditer(query):
        raw = found.group(0)
        word = raw.casefold()
        said.add(word)
        inside = found.start() > 0 and query[: found.start()].rstrip()[-1:] not in ".!?:;"
        if raw[:1].isupper() and not raw.isupper() and inside:
            continue
        out |= _BY_WORD.get(word, frozenset())
    for pattern, words in PHRASES:
        if pattern.search(query):
            out |= words
    return sorted(out - said)


def widened(query: str) -> str:
    """The query with its companions appended (the query itself when it has none)."""
    extra = companions(query)
    return f"{query} {' '.join(extra)}" if extra else query
