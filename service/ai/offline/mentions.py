"""Entity mentions of the offline extractor: lexicon terms, capitalised names, backticked and quoted names."""

from __future__ import annotations

import re
from dataclasses import dataclass

from service.ai.offline.lexicon import find_terms
from service.ai.offline.text import MAX_ENTITIES, MAX_NAME_TOKENS, USER_ENTITY, rx

NON_TECH_TYPES = frozenset({"person", "place", "organization", "thing"})


@dataclass(frozen=True)
class Mention:
    start: int
    end: int
    name: str
    type: str
    tech: bool  # a lexicon technology or a named component: may take uses/depends_on/... relations


_CALENDAR = frozenset(
    {
        "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday",
        "january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november",
        "december", "today", "tomorrow", "yesterday",
    }
)
_NOT_NAMES = frozenset(
    {
        "i", "i'm", "i've", "i'd", "i'll", "ok", "okay", "yes", "no", "hi", "hello", "hey", "thanks", "please",
        "mr", "mrs", "ms", "dr", "the", "a", "an", "and", "or", "but", "so", "also",
    }
)
_TOKEN = re.compile(r"\S+")
_EDGE_PUNCT = "\"'`()[]{},.;:!?*\u201c\u201d\u2018\u2019"
_PERSON_CUE = rx(
    r"\b(?:my (?:new |current )?(?:colleague|coworker|co-worker|friend|manager|boss|wife|husband|partner|daughter|son|"
    r"brother|sister|mom|mother|dad|father|teammate|team lead|lead|cto|ceo|mentor)(?:\s+(?:is|was)(?:\s+now)?)?|"
    r"name is|call me|named|i'm|i am|with|ask|tell|report to)\s+$"
)
# "a project called Atlas", "our app named Kite": the name is the project's
_PROJECT_CUE = rx(r"\b(?:project|app|service|repo|product|codebase|tool)\s+(?:called|named)\s+$")
_ORG_CUE = rx(r"\b(?:at|for|joined|left)\s+$")
_PLACE_CUE = rx(r"\b(?:in|from|near|(?:moved|move|moving|relocated|relocating) to)\s+$")
_WORK_CONTEXT = rx(r"\b(?:work|works|working|worked|started|joined|job|employed|leading|engineer|developer|team)\b")
# A capitalised word that starts a sentence is a name only when what follows says so: "Tom and I ...", "Maya, my
# sister, ...", "Orion is a web app ...", "Maya lives in ..." (a few words that are no name are excluded).
PERSON_NOUN = (
    r"(?:friend|colleague|coworker|co-worker|manager|boss|teammate|neighbou?r|partner|wife|husband|girlfriend|"
    r"boyfriend|sister|brother|mom|mother|dad|father|son|daughter|cousin|aunt|uncle|niece|nephew|grandma|grandpa|"
    r"flatmate|roommate|"
    r"grandmother|grandfather|mentor|landlord|doctor|dentist|therapist|coach|tutor|lead|cto|ceo|founder)"
)
_SOFTWARE_NOUN = (
    r"(?:app|application|project|service|tool|library|framework|site|website|api|game|platform|product|repo|"
    r"repository|codebase|system|bot|package|plugin|extension|cli|engine|dashboard|backend|frontend)"
)
_OTHER_NOUN = r"(?:startup|company|band|restaurant|cafe|bar|shop|dog|cat|puppy|kitten)"
_START_PERSON = rx(
    rf"^(?:\s+[A-Z][\w'-]*)?(?:\s+(?:and|&)\s+(?:i|me|my|we)\b|,\s+(?:my|our)\s+(?:[\w-]+\s+)?{PERSON_NOUN}\b|"
    rf"\s+(?:is|was)\s+(?:my|our)\s+(?:[\w-]+\s+)?{PERSON_NOUN}\b|"
    r"\s+(?:said|says|told|asked|thinks|is the [\w-]+(?: [\w-]+)? (?:on|of|for|at))\b)"
)
_START_THING = rx(rf"^\s+(?:is|was)\s+(?:a|an|the|our|my)\s+(?:[\w-]+\s+){{0,3}}?(?:(?P<software>{_SOFTWARE_NOUN})|"
                  rf"{_OTHER_NOUN})\b")
_NOT_START_NAMES = frozenset(
    {
        "this", "that", "these", "those", "it", "its", "there", "here", "he", "she", "they", "we", "you", "what",
        "which", "who", "each", "every", "some", "my", "our", "your", "his", "her", "their", "everything", "nothing",
        "something", "someone", "everyone", "nobody", "anyone", "today", "tomorrow", "yesterday", "mine", "one",
        "mom", "dad", "mum",
    }
)
_BACKTICK = re.compile(r"`([A-Za-z0-9][\w.@/-]{0,60})`")
_QUOTED_NAME = rx(r"\b(?:called|named)\s+[\"'\u201c\u2018]([^\"'\u201d\u2019]{1,60})[\"'\u201d\u2019]")


def _proper_names(text: str, taken: list[tuple[int, int]]) -> list[Mention]:
    def covered(a: int, b: int) -> bool:
        return any(a < y and x < b for x, y in taken)

    tokens: list[tuple[int, int, str, bool]] = []  # start, end, core, capitalised name token
    prev_raw = ""
    for match in _TOKEN.finditer(text):
        raw = match.group(0)
        core = raw.strip(_EDGE_PUNCT)
        if core.endswith("'s"):
            core = core[:-2]
        offset = match.start() + raw.find(core) if core else match.start()
        sentence_start = not tokens or prev_raw[-1:] in ".!?:;" or raw[:1] in "\"'(\u201c\u2018"
        if sentence_start and core and core.casefold() not in _NOT_START_NAMES:
            rest = text[offset + len(core):]
            start_name = bool(_START_PERSON.match(rest) or _START_THING.match(rest))
        else:
            start_name = False
        is_name = (
            bool(core)
            and (not sentence_start or start_name)
            and core[0].isupper()
            and core.casefold() not in _NOT_NAMES
            and core.casefold().removesuffix("s") not in _CALENDAR
            and re.fullmatch(r"[A-Z][A-Za-z'&-]*", core) is not None
            and re.fullmatch(r"[A-Z]{2,}s?", core) is None  # acronyms: API, PRs, CET
            and not covered(offset, offset + len(core))
        )
        tokens.append((offset, offset + len(core), core, is_name))
        prev_raw = raw
    mentions: list[Mention] = []
    i = 0
    while i < len(tokens):
        if not tokens[i][3]:
            i += 1
            continue
        j = i
        # Join adjacent capitalised tokens ("Marta Kowalski", "Osteria Nonna") unless punctuation separates them.
        while (
            j + 1 < len(tokens)
            and j - i < MAX_NAME_TOKENS - 1
            and tokens[j + 1][3]
            and text[tokens[j][1] : tokens[j + 1][0]] == " "
        ):
            j += 1
        start, end = tokens[i][0], tokens[j][1]
        before, after = text[:start], text[end:]
        if not before.strip() and _START_PERSON.match(after):
            etype = "person"
        elif not before.strip() and (thing := _START_THING.match(after)) is not None:
            etype = "project" if thing.group("software") else "thing"
        elif _PROJECT_CUE.search(before):
            etype = "project"
        elif _PERSON_CUE.search(before):
            etype = "person"
        elif _ORG_CUE.search(before):
            etype = "organization"
        elif _PLACE_CUE.search(before):
            etype = "place"
        else:
            etype = "thing"
        mentions.append(Mention(start, end, text[start:end], etype, tech=False))
        i = j + 1
    return mentions


def find_mentions(text: str) -> list[Mention]:
    """Entity mentions in one clause, left to right, one per distinct name."""
    mentions: list[Mention] = []
    for start, end, term in find_terms(text):
        etype = term.type
        before = text[:start]
        if etype == "service" and _ORG_CUE.search(before) and _WORK_CONTEXT.search(before):
            etype = "organization"
        mentions.append(Mention(start, end, term.canonical, etype, tech=etype not in ("place", "standard")))
    taken = [(m.start, m.end) for m in mentions]
    for match in _BACKTICK.finditer(text):
        if not any(match.start() < y and x < match.end() for x, y in taken):
            after = text[match.end() : match.end() + 12].casefold()
            named_part = after.lstrip().startswith(("service", "api", "module", "package", "library"))
            etype = "service" if named_part else "thing"
            mentions.append(Mention(match.start(1), match.end(1), match.group(1), etype, tech=True))
            taken.append((match.start(), match.end()))
    for match in _QUOTED_NAME.finditer(text):
        if not any(match.start(1) < y and x < match.end(1) for x, y in taken):
            mentions.append(Mention(match.start(1), match.end(1), match.group(1).strip(), "thing", tech=True))
            taken.append((match.start(1), match.end(1)))
    mentions.extend(_proper_names(text, taken))
    mentions.sort(key=lambda m: m.start)
    seen: set[str] = set()
    unique: list[Mention] = []
    for m in mentions:
        key = m.name.casefold()
        if key not in seen and key not in (USER_ENTITY,):
            seen.add(key)
            unique.append(m)
    return unique[:MAX_ENTITIES - 1]  # leave room for the subject entity


# --------------------------------------------------------------------------------------------
# Relations
# --------------------------------------------------------------------------------------------

# Predicate a technology gets from the fact's category when no explicit cue governs it.
