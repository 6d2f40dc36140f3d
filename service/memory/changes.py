"""Corrections in conversations, without an LLM: a later statement about the same slot supersedes the earlier one
(docs/preferences.md, "Corrections in conversations"). Only a user's own messages to the agent count: a
transcript's labelled lines ("Caroline: ...", two people talking) are a record of chatter, where these rules
cannot tell a correction from small talk.

A user's message *changes* something when it carries a change word ("actually", "now", "no longer", "switched",
"moved ... to", "my new manager is", "went up to", "from now on", "sold"). Such a message supersedes the earlier
memories of the same user that state the same slot: their text is close to the message's by the embedding model
(at or above the model's calibrated `slot` cosine, core/embedding_models.py) and they share a content word with it
(the slot's noun: "seats", "manager", "CI", "rent"), other than the change words. When the change names its slot
("my new manager", "moved the wedding", "the rent is now", "sold the Civic") and the earlier statement has that
word, a lower cosine suffices (the model's `slot_named`). The earlier memories stay as
history (`superseded_by`), out of search and context unless asked for.

What this cannot catch (an LLM extractor can): a change stated without a change word ("My manager is Priya" after
"My manager is Dana"); a change that shares no word with what it changes ("I switched to Neovim" after "I use
VS Code for everything": the slot, "editor", is named by neither); one message that changes two slots. It may
also take a statement about a close slot for the same one when both share a noun ("the flight budget is now 400"
after "the hotel budget is 120" is kept apart only when their texts are far enough apart).
"""

from __future__ import annotations

import re

from service.core.embedding_models import Calibration
from service.memory.windows import speaker_label, without_label
from service.text.slots import GROUPED, canonical

# Words that say a value changed, anywhere in a clause. "now" counts unless it is "right now", "for now", "just now"
# or "now that"; "instead" unless "instead of"; the conversational "actually" and "update" only open a clause.
CHANGE = re.compile(
    r"\b(?:(?<!right )(?<!for )(?<!just )now(?! that)|nowadays|these days|any ?more|no longer|not \w+ any ?more|"
    r"switch(?:ed|ing)|moved|mov(?:ing|es) (?:to|from|over)|migrat(?:ed|ing)|changed|changing|from now on|"
    r"instead(?! of)|"
    r"replac(?:ed|ing)|sold|upgraded|downgraded|(?:went|gone|goes) (?:up|down)|raised|lowered|increased|decreased|"
    r"make (?:that|it)|correction|postponed|pushed (?:back|to)|rescheduled|quit|stopped|no more|killed|ditched|"
    r"cancell?ed|dumped|"
    r"(?:jump|doubl|tripl|halv|dropp|bump|extend|adjust|promot)(?:ed|ing)|took over|cut to|rose to|fell to)\b",
    re.IGNORECASE,
)
OPENS = re.compile(r"^\W*(?:actually|update|correction|scratch that|no wait)\b", re.IGNORECASE)
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9+#.'-]*")
_STOP = frozenset(re.findall(r"\S+", """
a about above after again against all also am an and any are as at be because been before being below between both
but by can could did do does doing down during each few for from further had has have having he her here hers him
his how i i'd i'll i'm i've if in into is it it's its just me more most my no nor not of off on once only or other
our ours out over own same she should so some such than that the their them then there these they this those
through to too under until up very was we were what when where which while who whom why will with would you your
yours yes ok okay thanks thank please sure great good well really think want like get got one two last next week
month year day today tomorrow yesterday let let's make that's there's we're they're you're we've they've
we'll isn't aren't wasn't don't doesn't didn't won't can't
run runs running use uses used using live lives work works go goes going come comes take takes keep need start
try look say tell know see feel find give thing stuff actually update correction instead right
"""))


_CLAUSE = re.compile(r"[.;!?]+\s+|,\s*|\s+(?:so|because|but|and then|while)\s+", re.IGNORECASE)


def clauses(text: str) -> list[str]:
    """A message's clauses (split at sentence ends, commas and "so", "because", "but"); one of three words or fewer
    ("From now on", "For the hotel") belongs to the next one."""
    out: list[str] = []
    carry = ""
    for part in _CLAUSE.split(text):
        clause = f"{carry} {part}".strip()
        if len(part.split()) <= 3:
            carry = clause
            continue
        out.append(clause)
        carry = ""
    if carry:
        out.append(carry)
    return out


# "my new manager is ...", "new drummer: ...": a slot with a new value ("new clients", "a new lease ends ..." describe)
NEW_VALUE = re.compile(r"\bnew (\w+)(?= (?:is|are|was)\b|[:,]|\W*$)", re.IGNORECASE)


def changes(text: str) -> bool:
    """Whether a message (or a clause of it) says that something changed."""
    return any(changing_clause(clause) for clause in clauses(text))


def changing_clause(clause: str) -> bool:
    return bool(CHANGE.search(clause) or NEW_VALUE.search(clause) or OPENS.search(clause))


def slot_words(text: str) -> frozenset[str]:
    """The content words of a statement (lower-cased, a plural's "s" dropped, a word of a slot group as its group:
    "pipeline" and "build" as "ci", "max" as "budget", service/text/slots.py): what its slot may be
    named by. Change words and function words are left out, and so are names (a capitalised word inside a sentence):
    two statements about one person, client or project ("my contact at Brightleaf", "Brightleaf pays 95 an hour")
    are not about one slot for naming it. An acronym counts ("CI")."""
    out = set()
    for found in _WORD.finditer(text):
        raw = found.group(0)
        before = text[: found.start()].rstrip()
        if raw[:1].isupper() and not raw.isupper() and before and before[-1] not in ".!?:;":
            continue  # a name
        word = raw.strip(".'-").casefold()
        if len(word) < 3 and not (len(raw) >= 2 and raw.isupper()):
            continue
        if word in _STOP or CHANGE.fullmatch(word):
            continue
        if word not in GROUPED and len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        out.add(canonical(word))
    return frozenset(out)


_ROLE_LINE = re.compile(r"^(user|assistant|system|tool):\s?")


def said_by(content: str, label: str | None) -> str:
    """What one speaker said in a stored memory, without speaker labels: an interaction window's `user:` lines of
    that speaker (a transcript's "Caroline: ..." lines are Caroline's, unlabelled ones the user's), or a fact's or a
    raw write's content when it is that speaker's ("" when it is someone else's)."""
    lines = content.splitlines()
    if lines and all(_ROLE_LINE.match(line) for line in lines):
        mine = [without_label(text) for line in lines if line.startswith("user:")
                and speaker_label(text := _ROLE_LINE.sub("", line, count=1)) == label]
        return " ".join(mine)
    return without_label(content) if speaker_label(content) == label else ""


_CHANGED = r"(?:moved|sold|switched|changed|replaced|rescheduled|postponed|jumped|doubled|dropped|went up|went down)"
_NAMED = re.compile(
    rf"{NEW_VALUE.pattern}|\b(\w+) (?:is|are) now\b|\b{_CHANGED} (?:the |our |my |his |her |their )?(\w+)|"
    rf"\b(\w+)(?= (?:{_CHANGED}|(?:has|have|got) {_CHANGED})\b)",
    re.IGNORECASE,
)


def named_slots(text: str) -> frozenset[str]:
    """The words a change names as what changed: "my new *manager*", "the *rent* is now", "moved the *wedding*",
    "the *wedding* moved to", "*insurance* jumped to" ("new clients" names no slot: "new" alone describes)."""
    return frozenset(w for m in _NAMED.finditer(text) for g in m.groups() if g for w in slot_words(g))


def changed_words(text: str) -> frozenset[str]:
    """The slot words of the clauses of a message that say something changed ("switched to new shoes, the physio
    thinks ..." changed the shoes, not the physio)."""
    return frozenset(w for c in clauses(text) if changing_clause(c) for w in slot_words(c))


# Slots people name without sharing a word with what they replace ("we moved to Porto" after "I live in Lisbon", "every
# pipeline runs on GitHub Actions now" after "our CI runs on Jenkins"): a frame gives (slot, whose). The subject is
# "user" for I / we / our, else the relative a possessive names ("my sister lives in Lyon": "sister"), so a brother's
# city never replaces a sister's.
_WHO = r"(?P<who>I|we|my (?P<rel>\w+)|our (?P<orel>\w+))"
_FRAME_PATTERNS: tuple[tuple[str, str], ...] = (
    ("home", rf"\b{_WHO}(?:'ve| have| had|'re| are|'m| am| is| just| now| recently| finally)*\s+"
             r"(?:(?:live[sd]?|living)\b(?!-)|(?:moved|relocated|moving) (?:back )?(?:to|into|from|back|out|abroad|"
             r"away|here|there|house|home|across|over)\b|(?:based|settled) (?:in|out)\b)"),
    ("home", r"\b(?P<who>my|our) (?:new )?(?:home|place|apartment|flat|house) is (?:in|now in)\b"),
    ("manager", r"\b(?P<who>my|our) (?:new |current )?(?:manager|boss|line manager|team lead|supervisor)\b"),
    ("manager", r"\b(?P<who>I|we) (?:now )?report(?:s|ed)? (?:directly )?to\b"),
    ("employer", r"\b(?P<who>I|we)(?:'m| am| now| just| no longer| don't| do not| still)* (?:work(?:s|ing)?|employed) "
                 r"(?:at|for)\b"),
    ("employer", r"\b(?P<who>I|we) (?:just |recently )?(?:joined|started at|started working at)\b"),
    ("ci", r"\b(?P<who>)(?:CI|CI/CD|continuous integration|(?:every |all |our |the )?(?:pipelines?|builds?)) "
           r"(?:now )?(?:runs?|running|is|are|lives?|happens?) (?:now )?(?:on|in|through)\b"),
    ("ci", r"\b(?P<who>)(?:use|using|moved|switched|migrated) [\w .-]{1,30} for (?:CI|our CI|our pipelines|builds)\b"),
)
_FRAMES = tuple((slot, re.compile(pattern, re.IGNORECASE)) for slot, pattern in _FRAME_PATTERNS)
# "switched Atlas from Flask to FastAPI", "moved from Lisbon to Porto": the old value is named
_FROM_TO = re.compile(r"\b(?:switch(?:ed|ing)?|mov(?:ed|ing)|migrat(?:ed|ing)|chang(?:ed|ing)|went|port(?:ed|ing)|"
                      r"replac(?:ed|ing)|upgrad(?:ed|ing))\b(?P<what>(?: \w+){0,3}?) from (?P<old>[\w .+#-]{1,40}?) "
                      r"(?:to|for|with) \w", re.IGNORECASE)


def frames(text: str) -> frozenset[tuple[str, str]]:
    """The (slot, subject) pairs a statement names: ("home", "user") for "I live in Lisbon" and "we moved to Porto",
    ("home", "sister") for "my sister lives in Lyon", ("manager", "user"), ("employer", "user"), ("ci", "")."""
    out = set()
    for slot, pattern in _FRAMES:
        for found in pattern.finditer(text):
            relative = found.groupdict().get("rel") or found.groupdict().get("orel")
            if slot == "ci":
                out.add((slot, ""))  # the project's (the write's project_id) or the user's
            else:
                out.add((slot, relative.casefold() if relative else "user"))
    return frozenset(out)


def replaced_values(text: str) -> list[tuple[str, str]]:
    """(what, old value) of each "from A to B" change in a message: ("Atlas", "Flask") for "we switched Atlas from
    Flask to FastAPI"; what is "" when the change names nothing ("moved from Lisbon to Porto")."""
    return [(found.group("what").strip(), found.group("old").strip()) for found in _FROM_TO.finditer(text)]


def _mentions(text: str, name: str) -> bool:
    return bool(name) and re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text, re.IGNORECASE) is not None


def same_slot(new: str, old: str, cosine: float, calibration: Calibration) -> bool:
    """A later message and an earlier statement of the same slot:
    - both name one slot of one subject by a frame (`frames`: where they live, who manages them, where they work,
      what the CI runs on), whatever their words;
    - or the change names the value it replaces ("from Flask to FastAPI") and the earlier statement states it (and
      the thing changed, when the change names one: "Atlas");
    - or they are close by the model and share a content word of a changing clause (closer than `slot`, or than
      `slot_named` when the shared word is the one the change names)."""
    changing = " ".join(c for c in clauses(new) if changing_clause(c)) or new
    if frames(changing) & frames(old):
        return True
    for what, value in replaced_values(new):
        names = [w for w in what.split() if w[:1].isupper()]  # "Atlas": the earlier statement is about it too
        if _mentions(old, value) and (not names or any(_mentions(old, name) for name in names)):
            return True
    shared = changed_words(new) & slot_words(old)
    if not shared:
        return False
    return cosine >= (calibration.slot_named if shared & named_slots(new) else calibration.slot)

