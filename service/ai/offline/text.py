"""Text handling of the offline extractor: sentence and clause segmentation, filler trimming, noise tests."""

from __future__ import annotations

import re

from service.ai.offline.lexicon import lookup

MAX_SENTENCE_CHARS = 500  # longer "sentences" are pasted text or code, not a statement
MIN_WORDS = 3
MAX_ENTITIES = 32
MAX_RELATIONS = 32
MAX_NAME_TOKENS = 4  # "Osteria Nonna", "Marta Kowalski"; a longer capitalised run is a title, not a name
USER_ENTITY = "user"
PROJECT_ENTITY = "project"  # relation subject for "we use X" when no project_id is given


def rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


# --------------------------------------------------------------------------------------------
# Segmentation and cleaning
# --------------------------------------------------------------------------------------------

_FENCE = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)
_BULLET = re.compile(r"^\s*[-*•]\s+")
_NUMBERED = re.compile(r"^\s*(?:\d{1,2}[.)]|step \d{1,2}:?)\s+", re.IGNORECASE)
_BOUNDARY = re.compile(r"[.!?]+[\"')\]]*\s+")
_ABBREVIATIONS = frozenset({"e.g", "i.e", "etc", "vs", "mr", "mrs", "ms", "dr", "st", "approx", "incl", "fig"})
# Only independent clauses with their own first-person subject are split off.
_CLAUSE_SPLIT = rx(
    r",?\s+(?:and|but)\s+(?:now\s+|then\s+|also\s+)?(?=(?:i(?!\s+(?:are|were|both)\b)|i'm|i've|i'd|we|we're|we've|we'd|"
    r"my|our)\b)|"
    r",\s+so\s+(?=(?:please|don't|do not|never|always|keep|avoid|use|make sure|stick to|i|i'm|we|we're)\b)"
)

_FILLER_WORDS = (
    r"ok(?:ay)?|yes|yeah|yep|yup|no|nope|right|so|well|sure|great|cool|nice|perfect|exactly|"
    r"thanks|thank you|thx|hi|hello|hey|hmm+|ah|oh|alright|anyway|actually|also|btw|fyi|by the way"
)
# "OK, ..." / "Also ..." / "and ..." at the start of a clause.
_LEADING_FILLER = rx(rf"^(?:(?:(?:{_FILLER_WORDS})\s*[,!.:;-]+|(?:also|and|but|btw|fyi|oh|so)\b)\s*)+")
# "Quick thing before we start: ..." / "Some context: ..." — a meta preamble before a colon.
_META_PREFIX = rx(
    r"^(?:[\w'-]+\s+){0,4}?(?:thing|context|note|heads[- ]up|fyi|reminder|background|info)\b[^:]{0,30}:\s+"
)

_QUESTION_START = rx(
    r"^(?:what|how|why|where|which|who|whom|whose|can you|could you|would you|will you|do you|does|did you|"
    r"is it|is there|are there|are you|should i|should we|shall|may i|when (?:is|are|do|does|did|will|should|can))\b"
)
_GREETING = rx(
    rf"^(?:(?:{_FILLER_WORDS}|good (?:morning|afternoon|evening|night)|bye|goodbye|see you|cheers|lol|haha|"
    r"got it|sounds good|no worries|np|cool thanks|not sure yet|that worked|that's all|nothing for now)\b[\s,!.]*)+$"
)
# A bare request to the assistant ("Fix the typo", "Book a table") is a task for the turn, not a fact.
_REQUEST_VERB = rx(
    r"^(?:please\s+)?(?:fix|book|write|rewrite|summari[sz]e|explain|show|give|tell|create|add|remove|delete|"
    r"update|check|look|start|make(?! sure)|remind|send|find|help|generate|refactor|implement|translate|open|"
    r"schedule|call|email|let(?!'s| us)|go ahead|try|continue|proceed|see|read|review|list|draft|change|rename|"
    r"move|print)\b"
)
_ANAPHORA = rx(r"\b(?:it|this|that|them|those|these)\b")
# A pronoun in a later clause of a sentence names a thing of an earlier one. Not "this"/"that" (often a determiner
# or a conjunction there: "this week", "I think that ..."), nor "she"/"her" ("my pronouns are she/her" is a fact).
_BACK_REFERENCE = rx(r"\b(?:it|its|them|they|their|those|these)\b")
_SEQUENCE = rx(r"\bfirst\b.*\bthen\b|,\s*(?:and\s+)?(?:only\s+)?(?:then|finally|after that|afterwards)\b")


def split_sentences(text: str) -> list[str]:
    """Sentences of one turn: code fences removed, one line per bullet, abbreviations respected.

    A numbered list of two or more items is kept together as one sentence, with the line that
    introduces it ("Here's how we cut a hotfix:"), items joined by "; " — the steps of one procedure.
    """
    out: list[str] = []
    steps: list[str] = []

    def flush_steps() -> None:
        if len(steps) >= 2:
            header = out.pop() if out and out[-1].endswith(":") else ""
            out.append(f"{header} {'; '.join(steps)}".strip())
        else:
            out.extend(steps)
        steps.clear()

    for raw in _FENCE.sub(" ", text).splitlines():
        if _NUMBERED.match(raw):
            steps.append(_NUMBERED.sub("", raw).strip().rstrip(";."))
            continue
        flush_steps()
        line = _BULLET.sub("", raw).strip()
        start = 0
        for match in _BOUNDARY.finditer(line):
            words = line[start : match.start()].split()
            if words and words[-1].rstrip(".").casefold() in _ABBREVIATIONS and match.group(0).startswith("."):
                continue
            out.append(line[start : match.end()].strip())
            start = match.end()
        if line[start:].strip():
            out.append(line[start:].strip())
    flush_steps()
    return out


# Words that say nothing of what a sentence is about: function words, and the words of a stance ("I really prefer
# it that way", "I love that", "that's how I like it"). A sentence made of these and a pronoun leans on the sentence
# before it for its subject (`leans_back`).
_EMPTY_WORDS = frozenset(re.findall(r"\S+", """
a an the i i'm i've i'd i'll me my mine myself we we're we've us our you your it it's its this that these
those they them their there here he she him her is are was were be been am do does did don't doesn't didn't
not no so very really just also too quite pretty much more most always never usually still even though anyway
way like likes liked love loves loved prefer prefers preferred enjoy hate hates want wants need needs think
feel find keep kept good great fine nice better best bad worse ok okay how what and or but to of for with in
on at by as one ones honestly definitely totally absolutely actually kind sort lot lots thing things stuff
"""))
_LEANING = rx(r"\b(?:it|that|this|them|they|those|these|one|ones|there|so)\b")


def leans_back(sentence: str) -> bool:
    """Whether a sentence needs the one before it to mean anything: it points back with a pronoun and names
    nothing of its own ("I really prefer it that way.", "That's what I like.", "Love them.")."""
    if not _LEANING.search(sentence):
        return False
    words = [w.strip(".,!?;:'\"()").casefold() for w in sentence.replace("\u2019", "'").split()]
    return not [w for w in words if w and w not in _EMPTY_WORDS]


def join_leaning(sentences: list[str]) -> list[str]:
    """The sentences of one turn, each one that leans back (`leans_back`) joined to the sentence before it, so a
    fact keeps what it is about ("I take my coffee black. I really prefer it that way." is one statement); one
    with nothing before it is left out: alone it names nothing."""
    out: list[str] = []
    for sentence in sentences:
        if leans_back(sentence):
            if out:
                out[-1] = f"{out[-1]} {sentence}"
            continue
        out.append(sentence)
    return out


def split_clauses(sentence: str) -> list[str]:
    """Independent clauses; one that is too short, or that points back with a pronoun ("I'm allergic to peanuts,
    so never suggest recipes with them"), stays with the clause before it: alone it would say nothing."""
    parts = [p.strip() for p in _CLAUSE_SPLIT.split(sentence)]
    merged: list[str] = []
    for part in parts:
        if merged and (len(part.split()) < MIN_WORDS or _BACK_REFERENCE.search(part)):
            merged[-1] = f"{merged[-1]}, {part}"
        elif part:
            merged.append(part)
    return merged


def clean_clause(clause: str) -> str:
    text = " ".join(clause.replace("\u2019", "'").replace("\u2018", "'").split())  # curly apostrophes
    for _ in range(3):
        stripped = _META_PREFIX.sub("", _LEADING_FILLER.sub("", text)).strip()
        if stripped == text:
            break
        text = stripped
    first = text.split(maxsplit=1)[0] if text else ""
    if first[:1].islower() and lookup(first.rstrip(",.:;")) is None:  # keep "npm", "iOS", "dbt" as written
        text = text[0].upper() + text[1:]
    return text


def is_noise(text: str) -> bool:
    """Questions, greetings, thanks, bare requests and fragments carry no fact."""
    words = text.split()
    if len(words) < MIN_WORDS or len(text) > MAX_SENTENCE_CHARS:
        return True
    if len(words) <= 4 and _ANAPHORA.search(text):
        return True  # "Don't upgrade it." means nothing without the sentence it was split from
    if text.rstrip().endswith("?") or _QUESTION_START.match(text) or _GREETING.match(text):
        return True
    return bool(_REQUEST_VERB.match(text) and not _SEQUENCE.search(text))


# --------------------------------------------------------------------------------------------
# Category rules
# --------------------------------------------------------------------------------------------

# Pseudo-categories resolved by context: an imperative rule or a style choice is a project
