"""Relations and dates of the offline extractor: snake_case predicates with the user or the project as
subject, single-valued facts, explicit dates."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date

from service.ai.extraction import (
    ExtractedRelation,
)
from service.ai.offline.mentions import Mention
from service.ai.offline.text import MAX_RELATIONS, PROJECT_ENTITY, USER_ENTITY, rx
from service.domain import CATEGORIES

_DEFAULT_PREDICATE: dict[str, str | None] = {
    "tech_stack": "uses",
    "dependency": "depends_on",
    "technical_skill": "knows",
    "decision": "decided",
    "task_context": "works_on",
    "preference": "prefers",
    "workflow": "uses",
    "architecture": "uses",
    "convention": "uses",
    "procedure": "uses",
    "personal_fact": "uses",
    "interaction": None,
    "domain_knowledge": None,
}
def _cue(predicate: str, *alternatives: str) -> tuple[str, re.Pattern[str]]:
    return predicate, rx("|".join(f"(?:{a})" for a in alternatives))


# Explicit cues, looked for in the text between the previous mention and this one.
_CUES: tuple[tuple[str, re.Pattern[str]], ...] = (
    _cue("is_named", r"\b(?:my name is|call me|i'm called|i am called)\b"),
    _cue(
        "works_at",
        r"\b(?:work|works|working|worked|started|joined|employed|leading|lead|engineer|scientist|developer|manager|"
        r"intern)\b(?:\s+[\w-]+){0,4}?\s+(?:at|for)\b",
    ),
    _cue(
        "lives_in",
        r"\b(?:live|lives|living|based|located|moved|relocated|grew up|born)\b(?:\s+[\w-]+){0,2}?\s+(?:in|to|from)\b",
        r"\bremotely from\b",
    ),
    _cue(
        "dislikes",
        r"\b(?:hate|hates|dislike|dislikes|can't stand|cannot stand|don't like|do not like|not a fan of|"
        r"avoid|avoids)\b",
    ),
    _cue("prefers", r"\b(?:prefer|prefers|preferred|like|likes|love|loves|enjoy|enjoys|rather|favou?rite)\b"),
    _cue(
        "depends_on",
        r"\b(?:depend|depends|rely|relies|pin|pins|pinned|stuck on|locked to|stay on|needs?|requires?)\b",
    ),
    _cue(
        "switched_to",
        r"\b(?:switch|switched|switching|migrate|migrated|migrating|move|moved|moving|port|ported|porting|upgrade|"
        r"upgraded)\b[^,;.]*?\bto\b",
        r"\breplac\w*\b[^,;.]*?\b(?:with|by)\b",
    ),
    _cue(
        "decided",
        r"\b(?:decided|chose|choose|picked|went with|going with|opted for|settled on|agreed on)\b",
        r"\b(?:'ll|will|to|let's|we|i|they) go with\b",
    ),
    _cue(
        "deploys_to",
        r"\b(?:deploy|deploys|deployed|deploying|hosted|host|hosts|publish|publishes|published)\s+"
        r"(?:[\w-]+\s+){0,2}?(?:to|on)\b",
    ),
    _cue("tests_with", r"\b(?:test|tests|tested|testing)\s+(?:[\w-]+\s+){0,2}?(?:with|using)\b"),
)
_PERSONAL_PREDICATES = frozenset({"is_named", "works_at", "lives_in", "prefers", "dislikes", "knows"})
# Between a cue and a name, these mean the name is the rejected or negated one ("X over Y", "don't use Y").
_BLOCKER = rx(
    r"\b(?:from|over|instead of|rather than|than|not|never|no|without|off|don't|do not|doesn't|does not|won't|"
    r"no longer|isn't|aren't)\b"
)
# The text between two names that makes the second share the first one's predicate ("X 2.1, Y and Z").
_COORDINATION = rx(r"^(?:\s*v?[\d.x*]*\s*(?:[<>=~!^]=?\s*v?[\d.x*]+)?\s*(?:,|and|or|plus|&|/)\s*)+$")
_PREFERRED_OVER = rx(r"^\s*(?:v?\d[\w.]*\s*)?(?:over|rather than|instead of|to)\b")
_REPLACED = rx(
    r"\breplac(?:e|ed|es|ing)\s+(?P<old>.+?)\s+(?:with|by)\s+|"
    r"\b(?:switch|switched|switching|migrat\w+|mov(?:e|ed|ing)|port\w*)\s+(?:[\w-]+\s+){0,3}?from\s+(?P<old2>.+?)\s+to\s+"
)
_SINGULAR = rx(r"\b(?:i|i'm|i've|i'd|i'll|me|my|myself)\b")
_PLURAL = rx(r"\b(?:we|we're|we've|we'd|we'll|us|our|this project|this repo|the team)\b")
_PROJECT_GROUP = frozenset(name for name, info in CATEGORIES.items() if info.group == "project")


def _subject(text: str, category: str, project_id: str | None) -> str | None:
    plural, singular = _PLURAL.search(text), _SINGULAR.search(text)
    project = project_id or PROJECT_ENTITY
    if plural and (not singular or plural.start() < singular.start()):
        return project
    if singular:
        return USER_ENTITY
    if category in _PROJECT_GROUP:
        return project
    return None


# Single-valued settings (service/stores/graph.py SINGLE_VALUED_PREDICATES): a newer value
# replaces the older one in the graph, so they get their own predicates and a normalised object.
_INDENT_VALUE = rx(r"\b(tabs|(?P<n>\d)[- ]?(?:space|spaces|spc))\b")
_INDENT_CONTEXT = rx(r"\bindent\w*|\btabs\b")
_TIMEZONE = rx(
    r"\b(?:time ?zone|tz)\s+(?:is\s+|=\s*)?(?:now\s+)?(?P<tz>[A-Za-z]+/[A-Za-z_]+|UTC\s?[+-]\s?\d{1,2}(?::\d\d)?|"
    r"GMT\s?[+-]\s?\d{1,2}|[A-Z]{2,5}T)\b"
)
_DATABASE_CONTEXT = rx(r"\b(?:database|db)\b")
_NOT_PRIMARY_DB = rx(r"\bcach\w*|\bqueue|\bbroker|\bsearch index|\banalytics\b")


def _single_valued(
    text: str, subject: str | None, mentions: list[Mention], add: Callable[[str, str, str], None]
) -> None:
    owner = subject or USER_ENTITY
    if _INDENT_CONTEXT.search(text) and (m := _INDENT_VALUE.search(text)) and not _BLOCKER.search(
        text[max(0, m.start() - 12) : m.start()]
    ):
        add(owner, "uses_indentation", "tabs" if m.group(1).casefold() == "tabs" else f"{m.group('n')} spaces")
    if (tz := _TIMEZONE.search(text)) is not None and owner == USER_ENTITY:
        add(USER_ENTITY, "has_timezone", re.sub(r"\s+", "", tz.group("tz")))
    if subject is not None and subject != USER_ENTITY and _DATABASE_CONTEXT.search(text) and not _NOT_PRIMARY_DB.search(
        text
    ):
        databases = [m for m in mentions if m.type == "database"]
        if databases:
            add(subject, "uses_database", databases[-1].name)


def find_relations(
    text: str, category: str, mentions: list[Mention], project_id: str | None
) -> list[ExtractedRelation]:
    subject = _subject(text, category, project_id)
    relations: list[ExtractedRelation] = []

    def add(subj: str, predicate: str, obj: str) -> None:
        if subj.casefold() != obj.casefold() and len(relations) < MAX_RELATIONS:
            relation = ExtractedRelation(subject=subj, predicate=predicate, object=obj, fact=text[:1000])
            if relation not in relations:
                relations.append(relation)

    carried: str | None = None
    prev_end = 0
    for index, mention in enumerate(mentions):
        gap = text[prev_end : mention.start]
        cue_end, predicate = -1, None
        for name, pattern in _CUES:
            for match in pattern.finditer(text, 0, mention.start):
                if prev_end < match.end() <= mention.start and match.end() > cue_end:
                    cue_end, predicate = match.end(), name
        if predicate is None and index > 0 and _COORDINATION.match(gap):
            predicate = carried
        blocked = bool(_BLOCKER.search(text[max(cue_end, prev_end) : mention.start]))
        prev_end = mention.end
        if predicate is None:
            predicate = _DEFAULT_PREDICATE[category]
        carried = predicate
        if blocked or predicate is None or subject is None:
            carried = None if blocked else carried
            continue
        personal = predicate in _PERSONAL_PREDICATES
        if personal and subject != USER_ENTITY:
            continue
        if predicate == "is_named" and mention.type != "person":
            continue
        if predicate == "works_at" and mention.type not in ("organization", "service", "thing"):
            continue
        if predicate == "lives_in" and mention.type not in ("place", "thing"):
            continue
        if predicate not in ("is_named", "works_at", "lives_in") and not mention.tech:
            continue
        if predicate == "prefers" and _PREFERRED_OVER.match(text[mention.end :]):
            predicate = "prefers_over"
        add(subject, predicate, mention.name)

    _single_valued(text, subject, mentions, add)

    # "replaced X with Y" / "switched from X to Y": X replaced_by Y.
    for match in _REPLACED.finditer(text):
        group = "old" if match.group("old") is not None else "old2"
        old = [m for m in mentions if match.start(group) <= m.start and m.end <= match.end(group) and m.tech]
        new = [m for m in mentions if m.start >= match.end() and m.tech][:1]
        for o in old:
            for n in new:
                add(o.name, "replaced_by", n.name)
    return relations


# --------------------------------------------------------------------------------------------
# Dates
# --------------------------------------------------------------------------------------------

_MONTHS = {
    name: index
    for index, names in enumerate(
        [("jan", "january"), ("feb", "february"), ("mar", "march"), ("apr", "april"), ("may",), ("jun", "june"),
         ("jul", "july"), ("aug", "august"), ("sep", "sept", "september"), ("oct", "october"), ("nov", "november"),
         ("dec", "december")],
        start=1,
    )
    for name in names
}
_MONTH = (
    r"(?P<month>jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sept?(?:ember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
_DATE_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"\b(?P<year>(?:19|20)\d\d)-(?P<mnum>\d\d)-(?P<day>\d\d)\b"),
    rx(rf"\b{_MONTH}\s+(?P<day>\d{{1,2}})(?:st|nd|rd|th)?,?\s+(?P<year>(?:19|20)\d\d)\b"),
    rx(rf"\b(?P<day>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}\s+(?P<year>(?:19|20)\d\d)\b"),
    rx(rf"\b{_MONTH}\s+(?:of\s+)?(?P<year>(?:19|20)\d\d)\b"),
    rx(r"\b(?:in|since|from|as of|starting|until|during|early|late|mid-?)\s+(?P<year>(?:19|20)\d\d)\b"),
)


def find_date(text: str) -> str | None:
    """An explicit date in the clause as an ISO date; a month or a year gives its first day."""
    for pattern in _DATE_PATTERNS:
        for match in pattern.finditer(text):
            groups = match.groupdict()
            month_name = (groups.get("month") or "jan").casefold().rstrip(".")
            month = int(groups["mnum"]) if groups.get("mnum") else _MONTHS.get(month_name, 1)
            day = int(groups["day"]) if groups.get("day") else 1
            try:
                return date(int(groups["year"]), month, day).isoformat()
            except ValueError:
                continue
    return None


# --------------------------------------------------------------------------------------------
# The extractor
# --------------------------------------------------------------------------------------------


