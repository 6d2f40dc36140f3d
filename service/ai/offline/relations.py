"""Relations and dates of the offline extractor: snake_case predicates with the user or the project as
subject, single-valued facts, explicit dates."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date

from service.ai.extraction import (
    ExtractedRelation,
)
from service.ai.offline.mentions import PERSON_NOUN, Mention
from service.ai.offline.text import MAX_RELATIONS, PROJECT_ENTITY, USER_ENTITY, rx
from service.core.domain import CATEGORIES

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


# A statement about someone or something named at its start: "My sister Maya lives in Lisbon", "Maya, my sister,
# ...", "Tom Becker is my colleague", "Orion is a web app built with Django". The named one is the subject, and a
# kin or work noun relates it to the user ("Maya sister_of user").
_KIN_BEFORE = rx(rf"^(?:my|our)\s+(?:(?:best|old|new|older|younger|little|big|eldest|oldest|youngest|former|"
                 rf"current)\s+)?(?P<noun>{PERSON_NOUN})\s+$")
_KIN_AFTER = rx(rf"^(?:,\s+|\s+(?:is|was)\s+)(?:my|our)\s+(?:[\w-]+\s+)?(?P<noun>{PERSON_NOUN})\b")
# "X is the tech lead on Y", "X is a designer at Y", "X leads Y"
_ROLE_LINK = rx(
    r"^\s+(?:is|was|'s)\s+(?:the|our|a|an|my)\s+(?P<role>(?:[\w-]+\s+){0,2}?[\w-]+)\s+(?:on|of|for|at|in)\s+$"
)
_UNNAMED_PERSON = rx(rf"^(?:my|our)\s+(?:[\w-]+\s+)?{PERSON_NOUN}(?:'s|s)?\b")
_I_SUBJECT = rx(r"\b(?:i|i'm|i've|i'd|i'll|we|we're|we've)\b")
_NOUN_FORMS = {"co-worker": "coworker", "mom": "mother", "mum": "mother", "dad": "father", "grandma": "grandmother",
               "grandpa": "grandfather", "neighbor": "neighbour"}


def _named_subject(text: str, mentions: list[Mention]) -> tuple[Mention, str | None] | None:
    """The person or project a clause is about when it names one at its start, and the kin or work noun relating
    it to the user (None when the clause gives none)."""
    for m in mentions:
        if m.type not in ("person", "project"):
            continue
        before, after = text[: m.start], text[m.end :]
        kin = _KIN_BEFORE.match(before) or (_KIN_AFTER.match(after) if not before.strip() else None)
        if kin is not None:
            noun = kin.group("noun").casefold()
            return m, _NOUN_FORMS.get(noun, noun).replace(" ", "_")
        if not before.strip() and not re.match(r"\s+(?:and|&)\s", after):
            return m, None
        return None
    return None


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
    subject: str | None = _subject(text, category, project_id)
    relations: list[ExtractedRelation] = []

    def add(subj: str, predicate: str, obj: str) -> None:
        if subj.casefold() != obj.casefold() and len(relations) < MAX_RELATIONS:
            relation = ExtractedRelation(subject=subj, predicate=predicate, object=obj, fact=text[:1000])
            if relation not in relations:
                relations.append(relation)

    person_subject = subject == USER_ENTITY
    named = _named_subject(text, mentions)
    if named is None and _UNNAMED_PERSON.match(text) and not _I_SUBJECT.search(text):
        subject = None  # "my brother lives in Berlin": about someone the graph has no name for, not the user
    if named is not None:
        who, noun = named
        subject, person_subject = who.name, who.type == "person"
        if noun is not None:
            add(who.name, f"{noun}_of", USER_ENTITY)
        for other in mentions:  # "X is the tech lead on Y": X tech_lead_of Y
            role = _ROLE_LINK.match(text[who.end : other.start]) if other.start > who.end else None
            if role is not None:
                words = role.group("role").casefold().split()
                link = "works_at" if text[: other.start].rstrip().endswith(" at") and words[-1] != "lead" \
                    else "_".join(words) + "_of"
                if link == "works_at" and not person_subject:
                    continue
                add(who.name, link, other.name)
                break

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
        if personal and not person_subject:
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


