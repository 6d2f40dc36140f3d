"""The graph's vocabulary (docs/graph.md): entity types and predicates.

Entity types: one documented set. Extractors and structured writes may name a synonym ("organisation",
"company", "city", "editor"); `entity_type` gives its canonical type, and a query on a canonical type matches every
synonym (`type_forms`), so entities stored before this vocabulary existed are found too. An unknown type is kept
(lower-cased, one word).

Predicates: snake_case. `normalise_predicate` turns free text ("works for", "Is working on") into the canonical
predicate when it is a known synonym, else into its snake_case form; the text itself is kept in the fact sentence.
The single-valued predicates (a newer fact supersedes the older one) are those of
`service.stores.graph.SINGLE_VALUED_PREDICATES`; every one of them is in this set.
"""

from __future__ import annotations

import re

ENTITY_TYPES: dict[str, str] = {
    "person": "a human being; the user is the entity \"user\"",
    "organization": "a company, team, institution",
    "place": "a city, country, address, region",
    "project": "something being built or worked on",
    "tool": "software used to do work: an editor, a CLI, an OS, a cloud",
    "language": "a programming or natural language",
    "framework": "an application framework",
    "library": "a package or library",
    "database": "a database or data store",
    "service": "a hosted service or API",
    "concept": "an idea, a method, a setting, a standard",
    "event": "something that happened or will happen at a time",
    "file": "a file or document",
    "thing": "anything else (generic)",
}

_TYPE_SYNONYMS: dict[str, str] = {
    "user": "person", "people": "person", "human": "person",
    "organisation": "organization", "company": "organization", "team": "organization", "org": "organization",
    "institution": "organization",
    "location": "place", "city": "place", "country": "place", "region": "place",
    "editor": "tool", "os": "tool", "cloud": "tool", "cli": "tool",
    "package": "library", "db": "database",
    "setting": "concept", "standard": "concept", "method": "concept",
    "meeting": "event",
    "document": "file",
    "": "thing", "none": "thing", "unknown": "thing", "entity": "thing", "other": "thing", "misc": "thing",
}

PREDICATES: dict[str, str] = {
    "is_named": "user -> their name (single-valued)",
    "works_at": "person -> organization (single-valued)",
    "lives_in": "person -> place (single-valued)",
    "has_timezone": "person -> timezone (single-valued)",
    "uses_indentation": "user/project -> indentation style (single-valued)",
    "uses_database": "project -> its primary database (single-valued)",
    "deploys_to": "project -> deployment target (single-valued)",
    "uses": "project/person -> tool, language, library...",
    "works_on": "person -> project",
    "prefers": "person -> what they like",
    "prefers_over": "person -> what they prefer over another",
    "dislikes": "person -> what they dislike",
    "knows": "person -> person or skill",
    "depends_on": "project -> dependency",
    "switched_to": "project/person -> what replaced the former choice",
    "replaced_by": "thing -> what replaced it",
    "decided": "person/project -> the decision's object",
    "tests_with": "project -> test tool",
    "part_of": "thing -> the whole it belongs to",
    "located_in": "thing -> place",
    "member_of": "person -> organization or team",
    "manages": "person -> person, team or project",
    "created": "person/organization -> what they made",
    "related_to": "anything -> anything (generic)",
}

_PREDICATE_SYNONYMS: dict[str, str] = {
    "name_is": "is_named", "called": "is_named", "is_called": "is_named",
    "works_for": "works_at", "employed_at": "works_at", "employed_by": "works_at", "is_employed_by": "works_at",
    "lives_at": "lives_in", "based_in": "lives_in", "resides_in": "lives_in", "is_based_in": "lives_in",
    "use": "uses", "using": "uses", "utilizes": "uses", "utilises": "uses", "uses_tool": "uses", "built_with": "uses",
    "is_working_on": "works_on", "working_on": "works_on", "work_on": "works_on", "contributes_to": "works_on",
    "likes": "prefers", "like": "prefers", "loves": "prefers", "enjoys": "prefers", "prefer": "prefers",
    "hates": "dislikes", "dislike": "dislikes", "avoids": "dislikes",
    "know": "knows", "knows_about": "knows",
    "depends": "depends_on", "requires": "depends_on", "needs": "depends_on", "relies_on": "depends_on",
    "migrated_to": "switched_to", "moved_to": "switched_to",
    "replaced_with": "replaced_by",
    "decided_on": "decided", "chose": "decided", "chosen": "decided", "decided_to_use": "decided",
    "opted_for": "decided",
    "tested_with": "tests_with", "tests_using": "tests_with",
    "belongs_to": "part_of", "is_part_of": "part_of",
    "is_in": "located_in", "is_located_in": "located_in",
    "is_member_of": "member_of", "member": "member_of",
    "leads": "manages", "runs": "manages",
    "made": "created", "built": "created", "founded": "created", "wrote": "created",
    "relates_to": "related_to", "related": "related_to",
}

_SNAKE = re.compile(r"[^0-9a-z]+")


def snake(text: str) -> str:
    return _SNAKE.sub("_", text.strip().casefold()).strip("_")[:100]


def normalise_predicate(text: str) -> str:
    """The canonical predicate of free text, else its snake_case form ("" for text without a letter or digit)."""
    form = snake(text)
    return _PREDICATE_SYNONYMS.get(form, form)


def predicate_forms(predicate: str) -> list[str]:
    """Every stored predicate a query for this one matches: its canonical form and the synonyms that map to it."""
    canonical = normalise_predicate(predicate)
    return sorted({canonical, *(k for k, v in _PREDICATE_SYNONYMS.items() if v == canonical)})


def entity_type(text: str) -> str:
    """The canonical type of an entity type's name (an unknown one kept, lower-cased, one word)."""
    form = _SNAKE.sub("_", text.strip().casefold()).strip("_")[:100]
    return _TYPE_SYNONYMS.get(form, form)


def type_forms(text: str) -> list[str]:
    """Every stored type a query for this one matches: the canonical type and its synonyms."""
    canonical = entity_type(text)
    return sorted({canonical, *(k for k, v in _TYPE_SYNONYMS.items() if v == canonical and k)})
